// The app's one SQLite database: opening (WAL, synchronous=FULL, foreign
// keys), the schema version in PRAGMA user_version and the forward migrations
// that bring an older file up to date. Qt-free. See docs/STORAGE.md.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "app/core/sqlite_db.h"

namespace moe {

// Why a database could not be opened. The file is never modified when this is
// thrown before migrations start (NewerSchema, NotADatabase, ForeignDatabase).
class AppDatabaseError : public std::runtime_error {
 public:
  enum class Kind {
    CannotOpen,       // folder not creatable, no permission, a directory, locked for too long
    NotADatabase,     // garbage or a damaged header: SQLite cannot read it
    ForeignDatabase,  // a valid SQLite file that belongs to another program
    NewerSchema,      // written by a newer moechat: refused, left as it is
    MigrationFailed,  // a migration step failed; the file stays at the last completed version
    InUse,            // another process (a second moechat) holds its lock
    ReadOnly,         // the system lets moechat read the file but not write it
  };
  AppDatabaseError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// One connection to the file. The stores (ConversationStore, DownloadStore,
// ModelRegistry) keep a reference to it: keep the AppDatabase in one place
// (a member, a unique_ptr) while they live. One per thread.
class AppDatabase {
 public:
  // The version this build writes. Each step n -> n+1 is one migration function.
  static constexpr int kSchemaVersion = 6;
  // PRAGMA application_id of a moechat database ('MOEc'), so a foreign SQLite
  // file chosen by mistake is refused instead of being "migrated".
  static constexpr int32_t kApplicationId = 0x4d4f4563;

  // Opens (creating the file and its folder when missing) and migrates to
  // kSchemaVersion. Throws AppDatabaseError with a message fit for the user.
  static AppDatabase open(const std::string& path);

  AppDatabase(AppDatabase&&) = default;
  AppDatabase& operator=(AppDatabase&&) = default;

  sql::Database& db() { return db_; }
  const std::string& path() const { return db_.path(); }
  // The version found in the file before migrating (0 for a new file).
  int openedAtVersion() const { return opened_at_version_; }
  int schemaVersion();
  std::string journalMode();
  // "ok", or the first problems PRAGMA integrity_check reports.
  std::string integrityCheck();
  // Rows whose foreign key points nowhere (PRAGMA foreign_key_check); 0 when sound.
  int64_t foreignKeyViolations();

 private:
  static AppDatabase openUnlocked(const std::string& path);
  explicit AppDatabase(sql::Database db, int opened_at) : db_(std::move(db)), opened_at_version_(opened_at) {}
  sql::Database db_;
  int opened_at_version_ = 0;
};

// Runs the pending migration steps up to target_version, each in its own
// transaction (BEGIN IMMEDIATE; step; user_version = n+1; COMMIT), re-reading
// the version under the write lock so two processes never apply a step twice.
// Returns the version reached. AppDatabase::open uses it; tests and tools use
// it to build a database as an older moechat left it.
int migrateSchema(sql::Database& db, int target_version = AppDatabase::kSchemaVersion);

// Wall-clock time as stored in every *_at column: Unix milliseconds.
int64_t unixMillisNow();

}  // namespace moe
