#include "app/core/app_database.h"

#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <system_error>

namespace moe {

namespace {

// ---- Schema history. Never edit a step that has shipped: add the next one. ----

// v1: conversations, messages, and a full-text index over message text. The
// FTS5 table is external-content (it stores only the index, the text lives in
// messages), kept in sync by the three triggers. AUTOINCREMENT: an id is never
// handed out twice, so a stale id the UI or a late checkpoint still holds (the
// reply a regenerate deleted) can never land on a newer row.
void migrateTo1(sql::Database& db) {
  db.exec(R"sql(
    CREATE TABLE conversations (
      id            INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused (see above)
      title         TEXT    NOT NULL DEFAULT '',
      created_at    INTEGER NOT NULL,
      updated_at    INTEGER NOT NULL,
      system_prompt TEXT    NOT NULL DEFAULT '',
      sampling_json TEXT    NOT NULL DEFAULT '{}',
      model_path    TEXT    NOT NULL DEFAULT '',
      deleted_at    INTEGER            -- NULL while live; set by a soft delete (undo restores it)
    );
    CREATE INDEX conversations_live_by_updated ON conversations (updated_at DESC) WHERE deleted_at IS NULL;

    CREATE TABLE messages (
      id                INTEGER PRIMARY KEY AUTOINCREMENT,
      conversation_id   INTEGER NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
      position          INTEGER NOT NULL,
      role              TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
      text              TEXT    NOT NULL DEFAULT '',
      state             TEXT    NOT NULL DEFAULT 'complete'
                        CHECK (state IN ('complete', 'streaming', 'interrupted', 'stopped', 'error')),
      created_at        INTEGER NOT NULL,
      updated_at        INTEGER NOT NULL,
      prompt_tokens     INTEGER,
      completion_tokens INTEGER,
      ttft_ms           REAL,
      prefill_tps       REAL,
      decode_tps        REAL,
      stop_reason       TEXT,
      UNIQUE (conversation_id, position)
    );
    CREATE INDEX messages_streaming ON messages (id) WHERE state = 'streaming';

    CREATE VIRTUAL TABLE messages_fts USING fts5 (
      text, content = 'messages', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2'
    );
    CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
      INSERT INTO messages_fts (rowid, text) VALUES (new.id, new.text);
    END;
    CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
      INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END;
    CREATE TRIGGER messages_fts_update AFTER UPDATE OF text ON messages BEGIN
      INSERT INTO messages_fts (messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
      INSERT INTO messages_fts (rowid, text) VALUES (new.id, new.text);
    END;
  )sql");
  db.exec("PRAGMA application_id = " + std::to_string(AppDatabase::kApplicationId));
}

// v2: installed model files and the download queue (resumable across restarts).
void migrateTo2(sql::Database& db) {
  db.exec(R"sql(
    CREATE TABLE models (
      id         INTEGER PRIMARY KEY,
      path       TEXT    NOT NULL UNIQUE,
      sha256     TEXT    NOT NULL DEFAULT '',  -- lowercase hex; '' until hashed
      name       TEXT    NOT NULL DEFAULT '',
      arch       TEXT    NOT NULL DEFAULT '',
      quant      TEXT    NOT NULL DEFAULT '',
      size_bytes INTEGER NOT NULL DEFAULT 0,
      source_url TEXT    NOT NULL DEFAULT '',
      added_at   INTEGER NOT NULL
    );
    CREATE INDEX models_by_sha256 ON models (sha256);

    CREATE TABLE downloads (
      id            INTEGER PRIMARY KEY AUTOINCREMENT,
      url           TEXT    NOT NULL,
      dest_path     TEXT    NOT NULL,
      sha256        TEXT    NOT NULL DEFAULT '',  -- expected, lowercase hex; '' when unknown
      expected_size INTEGER NOT NULL DEFAULT -1,  -- -1 when unknown
      bytes_done    INTEGER NOT NULL DEFAULT 0,
      state         TEXT    NOT NULL DEFAULT 'queued'
                    CHECK (state IN ('queued', 'running', 'paused', 'verifying', 'done', 'failed')),
      error         TEXT    NOT NULL DEFAULT '',
      catalog_id    TEXT    NOT NULL DEFAULT '',
      created_at    INTEGER NOT NULL,
      updated_at    INTEGER NOT NULL
    );
  )sql");
}

// v3: trained expert predictors, keyed by the model file's hash (a later issue fills it).
void migrateTo3(sql::Database& db) {
  db.exec(R"sql(
    CREATE TABLE predictors (
      id             INTEGER PRIMARY KEY,
      model_sha256   TEXT    NOT NULL,
      layer          INTEGER NOT NULL,
      distance       INTEGER NOT NULL,  -- how many layers ahead it predicts
      format_version INTEGER NOT NULL,
      weights        BLOB    NOT NULL,
      trained_on     TEXT    NOT NULL DEFAULT '',
      token_count    INTEGER NOT NULL DEFAULT 0,
      accuracy       REAL,
      created_at     INTEGER NOT NULL,
      UNIQUE (model_sha256, layer, distance, format_version)
    );
  )sql");
}

// v4: a regenerated reply is another alternative of its assistant turn instead
// of replacing the earlier one, so a kill during a regenerate cannot lose the
// reply that was complete. turn_id groups a turn's replies (the first reply's
// id; NULL for a reply never regenerated, which is a turn of its own); shown
// marks the one the chat and the prompts use. Existing rows are all shown.
void migrateTo4(sql::Database& db) {
  db.exec(R"sql(
    ALTER TABLE messages ADD COLUMN turn_id INTEGER;
    ALTER TABLE messages ADD COLUMN shown INTEGER NOT NULL DEFAULT 1 CHECK (shown IN (0, 1));
    CREATE INDEX messages_by_turn ON messages (turn_id) WHERE turn_id IS NOT NULL;
  )sql");
}

// v5: what wrote each reply: the model file's name and SHA-256 and the sampling
// (JSON, with the seed drawn for it). Empty for user messages and older replies.
void migrateTo5(sql::Database& db) {
  db.exec(R"sql(
    ALTER TABLE messages ADD COLUMN model_name TEXT NOT NULL DEFAULT '';
    ALTER TABLE messages ADD COLUMN model_sha256 TEXT NOT NULL DEFAULT '';
    ALTER TABLE messages ADD COLUMN sampling_json TEXT NOT NULL DEFAULT '';
  )sql");
}

// v6: edit-and-resend keeps the replies to the message edited as alternatives of its
// turn; answered_text is the message's text each of them answered ('' : the text it has).
void migrateTo6(sql::Database& db) {
  db.exec("ALTER TABLE messages ADD COLUMN answered_text TEXT NOT NULL DEFAULT ''");
}

// kMigrations[n] takes a database from version n to n+1.
const std::function<void(sql::Database&)> kMigrations[] = {migrateTo1, migrateTo2, migrateTo3,
                                                           migrateTo4, migrateTo5, migrateTo6};
static_assert(std::size(kMigrations) == AppDatabase::kSchemaVersion);

int readUserVersion(sql::Database& db) { return static_cast<int>(db.queryInt64("PRAGMA user_version")); }

[[noreturn]] void fail(AppDatabaseError::Kind kind, const std::string& path, const std::string& what) {
  throw AppDatabaseError(kind, "database '" + path + "': " + what);
}

void prepareFolder(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p(path);
  if (fs::is_directory(p, ec)) fail(AppDatabaseError::Kind::CannotOpen, path, "is a directory");
  if (p.has_parent_path()) {
    fs::create_directories(p.parent_path(), ec);
    if (ec) fail(AppDatabaseError::Kind::CannotOpen, path, "cannot create its folder: " + ec.message());
  }
}

// The first read of the file: tells garbage, foreign and newer files apart
// before anything is written to it.
int inspectExisting(sql::Database& db) {
  int version = 0;
  int64_t app_id = 0, objects = 0;
  try {
    version = readUserVersion(db);
    app_id = db.queryInt64("PRAGMA application_id");
    objects = db.queryInt64("SELECT count(*) FROM sqlite_schema");
  } catch (const sql::SqliteError& e) {
    if (e.primaryCode() == SQLITE_BUSY || e.primaryCode() == SQLITE_LOCKED) throw;
    if (e.primaryCode() == SQLITE_NOTADB || e.primaryCode() == SQLITE_CORRUPT)
      fail(AppDatabaseError::Kind::NotADatabase, db.path(),
           "not a readable SQLite database (damaged or another kind of file); it was left untouched (" +
               std::string(e.what()) + ")");
    fail(AppDatabaseError::Kind::CannotOpen, db.path(), e.what());
  }
  bool ours = app_id == AppDatabase::kApplicationId || (app_id == 0 && version == 0 && objects == 0);
  if (!ours)
    fail(AppDatabaseError::Kind::ForeignDatabase, db.path(),
         "an SQLite database that moechat did not create; it was left untouched");
  if (version > AppDatabase::kSchemaVersion)
    fail(AppDatabaseError::Kind::NewerSchema, db.path(),
         "written by a newer moechat (schema version " + std::to_string(version) + ", this build knows " +
             std::to_string(AppDatabase::kSchemaVersion) +
             "); it was left untouched. Use a newer moechat or another data folder.");
  return version;
}

// Connection settings (not stored in the file, except journal_mode=WAL which is persistent).
void configure(sql::Database& db) {
  std::string mode = db.queryText("PRAGMA journal_mode = WAL");
  if (mode != "wal")
    fail(AppDatabaseError::Kind::CannotOpen, db.path(),
         "cannot use write-ahead logging (journal mode stays '" + mode + "'); is it on a network share?");
  // FULL: each COMMIT fsyncs the WAL, so a committed message survives power loss
  // and OS crashes, not only a killed process (NORMAL would only promise the
  // latter). The app commits a handful of times per reply (the user message, a
  // checkpoint every few seconds, the finish), so the cost is a few fsyncs.
  db.exec("PRAGMA synchronous = FULL");
  db.exec("PRAGMA foreign_keys = ON");
}

}  // namespace

int64_t unixMillisNow() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

int migrateSchema(sql::Database& db, int target_version) {
  if (target_version < 0 || target_version > AppDatabase::kSchemaVersion)
    throw std::invalid_argument("migrateSchema: no schema version " + std::to_string(target_version));
  for (;;) {
    sql::Transaction tx(db);
    int version = readUserVersion(db);
    if (version > AppDatabase::kSchemaVersion)
      fail(AppDatabaseError::Kind::NewerSchema, db.path(),
           "schema version " + std::to_string(version) + " is newer than this build knows");
    if (version >= target_version) return version;  // tx rolls back: nothing was written
    try {
      kMigrations[version](db);
      db.exec("PRAGMA user_version = " + std::to_string(version + 1));
      tx.commit();
    } catch (const sql::SqliteError& e) {
      if (e.primaryCode() == SQLITE_BUSY || e.primaryCode() == SQLITE_LOCKED) throw;
      fail(AppDatabaseError::Kind::MigrationFailed, db.path(),
           "migration to schema version " + std::to_string(version + 1) + " failed, file kept at version " +
               std::to_string(version) + ": " + e.what());
    }
  }
}

AppDatabase AppDatabase::open(const std::string& path) {
  try {
    return openUnlocked(path);
  } catch (const AppDatabaseError&) {
    throw;
  } catch (const sql::SqliteError& e) {
    if (e.primaryCode() == SQLITE_BUSY || e.primaryCode() == SQLITE_LOCKED)
      fail(AppDatabaseError::Kind::InUse, path,
           "in use by another program (is moechat already running?); it was left untouched (" +
               std::string(e.what()) + ")");
    fail(AppDatabaseError::Kind::CannotOpen, path, e.what());
  }
}

AppDatabase AppDatabase::openUnlocked(const std::string& path) {
  prepareFolder(path);
  std::optional<sql::Database> db;
  try {
    db.emplace(path);
    db->setBusyTimeout(5000);  // another moechat (or a backup tool) may hold the lock briefly
  } catch (const sql::SqliteError& e) {
    fail(AppDatabaseError::Kind::CannotOpen, path, e.what());
  }
  int found = inspectExisting(*db);
  // SQLite falls back to reading a file it may not write; the chats could then not
  // be saved, and WAL could not be set up.
  if (sqlite3_db_readonly(db->handle(), "main") == 1)
    fail(AppDatabaseError::Kind::ReadOnly, path,
         "moechat may read this file but not write it (its permissions or the volume forbid writing); it was "
         "left untouched. Make it writable, or choose another data folder.");
  configure(*db);
  migrateSchema(*db);
  return AppDatabase(std::move(*db), found);
}

int AppDatabase::schemaVersion() { return readUserVersion(db_); }
std::string AppDatabase::journalMode() { return db_.queryText("PRAGMA journal_mode"); }

std::string AppDatabase::integrityCheck() {
  auto st = db_.prepare("PRAGMA integrity_check(20)");
  std::string out;
  while (st.step()) {
    if (!out.empty()) out += "; ";
    out += st.columnText(0);
  }
  return out;
}

int64_t AppDatabase::foreignKeyViolations() {
  auto st = db_.prepare("PRAGMA foreign_key_check");
  int64_t n = 0;
  while (st.step()) ++n;
  return n;
}

}  // namespace moe
