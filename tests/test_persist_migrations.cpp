// AppDatabase::open on files left by every older schema version (built by
// running the real migrations only up to that version and filling them the way
// that version's app would), and on files it must refuse without touching: a
// newer schema, garbage, a foreign SQLite database.
#include <QtTest>

#include <algorithm>

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QScopeGuard>
#include <QTemporaryDir>

#include "app/core/app_database.h"
#include "app/core/conversation_store.h"
#include "app/core/database_startup.h"
#include "app/core/download_store.h"
#include "app/core/model_registry.h"

using moe::AppDatabase;
using moe::AppDatabaseError;
namespace sql = moe::sql;

namespace {

QByteArray readAll(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return f.readAll();
}

void writeAll(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
  QCOMPARE(f.write(bytes), bytes.size());
}

// Texts with the characters that break naive SQL or JSON handling.
const std::string kUserText = "Quote ' and \"double\", a backslash \\ and \xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80";
const std::string kReplyText = "Reply with\nnewlines\tand tabs; DROP TABLE messages; --";
const std::string kSha = std::string(64, 'a');

// What a v1 app wrote: one conversation with two messages and one soft-deleted conversation.
void fillV1(sql::Database& db) {
  db.exec(
      "INSERT INTO conversations (id, title, created_at, updated_at, system_prompt, sampling_json, "
      "model_path) "
      "VALUES (1, 'first chat', 1000, 2000, 'be brief', '{\"temperature\":0.7}', '/m/a.gguf')");
  db.exec(
      "INSERT INTO conversations (id, title, created_at, updated_at, deleted_at) "
      "VALUES (2, 'binned', 1100, 1200, 1300)");
  auto st = db.prepare(
      "INSERT INTO messages (conversation_id, position, role, text, state, created_at, updated_at, "
      "prompt_tokens, completion_tokens, ttft_ms, prefill_tps, decode_tps, stop_reason) "
      "VALUES (?1, ?2, ?3, ?4, ?5, 1500, 1600, ?6, ?7, ?8, ?9, ?10, ?11)");
  st.bindInt64(1, 1).bindInt64(2, 0).bindText(3, "user").bindText(4, kUserText).bindText(5, "complete");
  st.run();
  st.reset();
  st.bindInt64(1, 1).bindInt64(2, 1).bindText(3, "assistant").bindText(4, kReplyText).bindText(5, "complete");
  st.bindInt64(6, 12).bindInt64(7, 34).bindDouble(8, 56.5).bindDouble(9, 78.25).bindDouble(10, 9.5);
  st.bindText(11, "eos");
  st.run();
  st.reset();
  st.bindInt64(1, 2).bindInt64(2, 0).bindText(3, "user").bindText(4, "deleted words").bindText(5, "complete");
  st.run();
}

// What a v2 app added: a model and an unfinished download.
void fillV2(sql::Database& db) {
  auto m = db.prepare(
      "INSERT INTO models (path, sha256, name, arch, quant, size_bytes, source_url, added_at) "
      "VALUES ('/m/a.gguf', ?1, 'Model A', 'qwen2moe', 'Q4_K', 123456789, 'https://x/a.gguf', 1700)");
  m.bindText(1, kSha);
  m.run();
  db.exec(
      "INSERT INTO downloads (url, dest_path, sha256, expected_size, bytes_done, state, error, catalog_id, "
      "created_at, updated_at) VALUES ('https://x/b.gguf', '/m/b.gguf', '', 5000, 1234, 'paused', '', "
      "'cat-b', "
      "1800, 1900)");
}

// What a v3 app added: a trained predictor.
void fillV3(sql::Database& db) {
  db.exec(
      "INSERT INTO predictors (model_sha256, layer, distance, format_version, weights, trained_on, "
      "token_count, accuracy, created_at) VALUES ('" +
      kSha + "', 0, 1, 1, x'00ff10', 'use', 4096, 0.85, 1950)");
}

void buildAtVersion(const QString& path, int version) {
  if (version == 0) {
    writeAll(path, {});  // an empty file: what a first launch that died before any write leaves
    return;
  }
  sql::Database db(path.toStdString());
  QCOMPARE(moe::migrateSchema(db, version), version);
  QCOMPARE(db.queryInt64("PRAGMA user_version"), int64_t(version));
  if (version >= 1) fillV1(db);
  if (version >= 2) fillV2(db);
  if (version >= 3) fillV3(db);
}

// The FTS index agrees with the messages table ('integrity-check' throws otherwise).
void checkFtsConsistent(sql::Database& db) {
  db.exec("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)");
}

int64_t ftsCount(sql::Database& db, const std::string& match) {
  auto st = db.prepare("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?1");
  st.bindText(1, match);
  st.step();
  return st.columnInt64(0);
}

}  // namespace

class PersistMigrationsTest : public QObject {
  Q_OBJECT
 private slots:
  void upgradesEveryOlderVersion_data() {
    QTest::addColumn<int>("version");
    for (int v = 0; v < AppDatabase::kSchemaVersion; ++v)
      QTest::newRow(qPrintable(QString("v%1").arg(v))) << v;
  }
  void upgradesEveryOlderVersion() {
    QFETCH(int, version);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath("moechat.db");
    buildAtVersion(path, version);

    AppDatabase adb = AppDatabase::open(path.toStdString());
    QCOMPARE(adb.openedAtVersion(), version);
    QCOMPARE(adb.schemaVersion(), AppDatabase::kSchemaVersion);
    QCOMPARE(adb.integrityCheck(), std::string("ok"));
    QCOMPARE(adb.foreignKeyViolations(), int64_t(0));
    QCOMPARE(adb.journalMode(), std::string("wal"));
    QCOMPARE(adb.db().queryInt64("PRAGMA foreign_keys"), int64_t(1));
    QCOMPARE(adb.db().queryInt64("PRAGMA application_id"), int64_t(AppDatabase::kApplicationId));
    checkFtsConsistent(adb.db());

    // Every table of the current schema exists (the v3 one included), and v4's columns.
    QCOMPARE(adb.db().queryInt64("SELECT count(*) FROM pragma_table_info('messages') WHERE name IN "
                                 "('turn_id', 'shown')"),
             int64_t(2));
    for (const char* table :
         {"conversations", "messages", "messages_fts", "models", "downloads", "predictors"}) {
      auto st = adb.db().prepare("SELECT count(*) FROM sqlite_schema WHERE name = ?1");
      st.bindText(1, table);
      st.step();
      QVERIFY2(st.columnInt64(0) == 1, table);
    }

    if (version >= 1) {
      sql::Database& db = adb.db();
      QCOMPARE(db.queryInt64("SELECT count(*) FROM conversations"), int64_t(2));
      QCOMPARE(db.queryText("SELECT text FROM messages WHERE conversation_id = 1 AND position = 0"),
               kUserText);
      QCOMPARE(db.queryText("SELECT text FROM messages WHERE conversation_id = 1 AND position = 1"),
               kReplyText);
      QCOMPARE(db.queryText("SELECT sampling_json FROM conversations WHERE id = 1"),
               std::string("{\"temperature\":0.7}"));
      QCOMPARE(db.queryInt64("SELECT completion_tokens FROM messages WHERE position = 1"), int64_t(34));
      QCOMPARE(db.queryText("SELECT stop_reason FROM messages WHERE position = 1"), std::string("eos"));
      QCOMPARE(db.queryInt64("SELECT deleted_at FROM conversations WHERE id = 2"), int64_t(1300));
      // Rows written before the upgrade are in the full-text index.
      QCOMPARE(ftsCount(db, "\"backslash\""), int64_t(1));
      QCOMPARE(ftsCount(db, "\"ete\""), int64_t(1));  // diacritics folded: "été"
      // The store reads what the older app wrote, and keeps writing after it.
      moe::ConversationStore store(adb);
      auto msgs = store.messages(1);
      QCOMPARE(msgs.size(), size_t(2));
      QCOMPARE(msgs[0].text, kUserText);
      QCOMPARE(msgs[1].stats.ttft_ms.value(), 56.5);
      // Every older reply is the shown one of a turn of its own, and a regenerate keeps it.
      QVERIFY(msgs[1].shown);
      QCOMPARE(msgs[1].alternatives, 1);
      QCOMPARE(db.queryInt64("SELECT count(*) FROM messages WHERE shown = 1 AND turn_id IS NULL"),
               int64_t(3));
      const int64_t regenerated = store.beginAlternative(msgs[1].id);
      QVERIFY(store.finishReply(regenerated, "a new reply", moe::MessageState::Complete));
      const auto turn = store.alternatives(msgs[1].id);
      QCOMPARE(turn.size(), size_t(2));
      QCOMPARE(turn[0].text, kReplyText);
      QCOMPARE(turn[0].stats.completion_tokens.value(), int64_t(34));
      QCOMPARE(store.messages(1).back().text, std::string("a new reply"));
      QVERIFY(store.showAlternative(msgs[1].id));
      QCOMPARE(store.messages(1).back().text, kReplyText);
      db.exec("DELETE FROM messages WHERE id = " + std::to_string(regenerated));
      QCOMPARE(store.list().size(), size_t(1));  // the soft-deleted one stays hidden
      QCOMPARE(store.search("backslash").size(), size_t(1));
      QVERIFY(store.search("deleted").empty());
      const int64_t added = store.addMessage(1, moe::Role::User, "after the upgrade");
      QCOMPARE(store.message(added)->position, int64_t(2));
      // The cascade still works after the upgrade.
      db.exec("DELETE FROM conversations WHERE id = 2");
      QCOMPARE(db.queryInt64("SELECT count(*) FROM messages"), int64_t(3));
      checkFtsConsistent(db);
    }
    if (version >= 2) {
      moe::ModelRegistry models(adb);
      auto m = models.findByPath("/m/a.gguf");
      QVERIFY(m.has_value());
      QCOMPARE(m->sha256, kSha);
      QCOMPARE(m->size_bytes, int64_t(123456789));
      QCOMPARE(m->added_at, int64_t(1700));
      moe::DownloadStore downloads(adb);
      auto pending = downloads.unfinished();
      QCOMPARE(pending.size(), size_t(1));
      QCOMPARE(pending[0].state, std::string("paused"));
      QCOMPARE(pending[0].bytes_done, int64_t(1234));
      QCOMPARE(pending[0].catalog_id, std::string("cat-b"));
    }
    // The new table works.
    adb.db().exec(
        "INSERT INTO predictors (model_sha256, layer, distance, format_version, weights, created_at) "
        "VALUES ('" +
        kSha + "', 3, 1, 1, x'0102', 5)");
    if (version >= 3)
      QCOMPARE(
          adb.db().queryText("SELECT hex(weights) || ' ' || token_count FROM predictors WHERE layer = 0"),
          std::string("00FF10 4096"));
    QCOMPARE(adb.integrityCheck(), std::string("ok"));
  }

  void reopeningIsANoOp() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("sub/dir/moechat.db").toStdString();  // folders are created
    { AppDatabase::open(path); }
    AppDatabase again = AppDatabase::open(path);
    QCOMPARE(again.openedAtVersion(), AppDatabase::kSchemaVersion);
    QCOMPARE(again.schemaVersion(), AppDatabase::kSchemaVersion);
  }

  void eachStepIsItsOwnTransaction() {
    // A step interrupted half-way leaves nothing behind: simulate by migrating to
    // 1, then making step 2 collide with an object that already exists.
    QTemporaryDir dir;
    const std::string path = dir.filePath("moechat.db").toStdString();
    {
      sql::Database db(path);
      moe::migrateSchema(db, 1);
      db.exec("CREATE TABLE downloads (x)");  // step 2 will fail on this
    }
    try {
      AppDatabase::open(path);
      QFAIL("the failing migration was not reported");
    } catch (const AppDatabaseError& e) {
      QCOMPARE(e.kind(), AppDatabaseError::Kind::MigrationFailed);
      QVERIFY(QString(e.what()).contains("version 2"));
    }
    sql::Database db(path);
    QCOMPARE(db.queryInt64("PRAGMA user_version"), int64_t(1));
    QCOMPARE(db.queryInt64("SELECT count(*) FROM sqlite_schema WHERE name = 'models'"), int64_t(0));
  }

  void newerVersionIsRefusedAndUntouched() {
    QTemporaryDir dir;
    const QString path = dir.filePath("moechat.db");
    { AppDatabase::open(path.toStdString()); }
    {
      sql::Database db(path.toStdString());
      db.exec("PRAGMA user_version = " + std::to_string(AppDatabase::kSchemaVersion + 1));
      db.exec("PRAGMA journal_mode = DELETE");  // a single file, so bytes tell the whole story
    }
    const QByteArray before = readAll(path);
    const QStringList files_before = QDir(dir.path()).entryList(QDir::Files);
    QVERIFY(!before.isEmpty());
    try {
      AppDatabase::open(path.toStdString());
      QFAIL("a newer database was accepted");
    } catch (const AppDatabaseError& e) {
      QCOMPARE(e.kind(), AppDatabaseError::Kind::NewerSchema);
      QVERIFY2(QString(e.what()).contains("newer moechat"), e.what());
    }
    QCOMPARE(readAll(path), before);
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files), files_before);
  }

  void newerVersionInWalModeIsUntouched() {
    QTemporaryDir dir;
    const QString path = dir.filePath("moechat.db");
    { AppDatabase::open(path.toStdString()); }
    { sql::Database(path.toStdString()).exec("PRAGMA user_version = 99"); }
    const QByteArray before = readAll(path);
    QVERIFY_THROWS_EXCEPTION(AppDatabaseError, AppDatabase::open(path.toStdString()));
    QCOMPARE(readAll(path), before);
  }

  void garbageIsRefusedAndUntouched_data() {
    QTest::addColumn<QByteArray>("bytes");
    QByteArray noise(8192, '\0');
    for (int i = 0; i < noise.size(); ++i) noise[i] = char((i * 7919 + 13) & 0xff);
    QTest::newRow("noise") << noise;
    QTest::newRow("short text") << QByteArray("hello, I am not a database\n");
    // A real header followed by the wrong page size and junk: a damaged database.
    QByteArray damaged("SQLite format 3", 16);
    damaged += QByteArray(4096 - 16, 'x');
    QTest::newRow("damaged header") << damaged;
  }
  void garbageIsRefusedAndUntouched() {
    QFETCH(QByteArray, bytes);
    QTemporaryDir dir;
    const QString path = dir.filePath("moechat.db");
    writeAll(path, bytes);
    try {
      AppDatabase::open(path.toStdString());
      QFAIL("garbage was accepted");
    } catch (const AppDatabaseError& e) {
      QCOMPARE(e.kind(), AppDatabaseError::Kind::NotADatabase);
      QVERIFY2(QString(e.what()).contains("left untouched"), e.what());
    }
    QCOMPARE(readAll(path), bytes);
    QCOMPARE(QDir(dir.path()).entryList(QDir::Files), QStringList{"moechat.db"});
  }

  void foreignDatabaseIsRefusedAndUntouched() {
    QTemporaryDir dir;
    const QString path = dir.filePath("other.db");
    {
      sql::Database(path.toStdString())
          .exec("CREATE TABLE bookmarks (url TEXT); INSERT INTO bookmarks VALUES ('x')");
    }
    const QByteArray before = readAll(path);
    try {
      AppDatabase::open(path.toStdString());
      QFAIL("a foreign database was accepted");
    } catch (const AppDatabaseError& e) {
      QCOMPARE(e.kind(), AppDatabaseError::Kind::ForeignDatabase);
    }
    QCOMPARE(readAll(path), before);
  }

  // The app's start on a database with damaged pages (the header still reads, the
  // tables do not): the user is asked; "no" leaves the file as it was, "yes" keeps
  // it renamed, byte for byte, and starts on a new database.
  void damagedPagesOfferANewDatabaseAndKeepTheOld() {
    QTemporaryDir dir;
    const QString path = dir.filePath("moechat.db");
    {
      AppDatabase db = AppDatabase::open(path.toStdString());
      moe::ConversationStore store(db);
      const int64_t c = store.createConversation("kept", "", "{}", "");
      for (int i = 0; i < 200; ++i) store.addMessage(c, moe::Role::User, std::string(200, 'a' + i % 26));
      db.db().exec("PRAGMA wal_checkpoint(TRUNCATE)");
    }
    QByteArray bytes = readAll(path);
    QVERIFY(bytes.size() > 8 * 4096);
    for (qsizetype i = 4096; i < bytes.size(); ++i)
      bytes[i] = char((i * 131) & 0xff);  // every page but the first
    writeAll(path, bytes);

    std::vector<moe::DatabaseTrouble> asked;
    auto refused = moe::openChatDatabase(path.toStdString(), dir.filePath("copies").toStdString(),
                                         [&](moe::DatabaseTrouble t, const std::string&) {
                                           asked.push_back(t);
                                           return moe::DatabaseWayOut::Quit;
                                         });
    QVERIFY(!refused.db);
    QVERIFY(!refused.error.empty());
    QCOMPARE(asked, std::vector<moe::DatabaseTrouble>{moe::DatabaseTrouble::Unreadable});
    QCOMPARE(readAll(path), bytes);

    auto fresh = moe::openChatDatabase(
        path.toStdString(), dir.filePath("copies").toStdString(),
        [](moe::DatabaseTrouble, const std::string&) { return moe::DatabaseWayOut::StartFresh; });
    QVERIFY(fresh.db.has_value());
    QVERIFY(!fresh.set_aside.empty());
    QCOMPARE(readAll(QString::fromStdString(fresh.set_aside)), bytes);
    QCOMPARE(moe::ConversationStore(*fresh.db).list().size(), size_t(0));
  }

  // A second moechat on the same data folder: the first holds the write lock.
  void aDatabaseInUseIsReportedNotReplaced() {
    QTemporaryDir dir;
    const QString path = dir.filePath("moechat.db");
    AppDatabase first = AppDatabase::open(path.toStdString());
    first.db().exec("BEGIN IMMEDIATE");
    const QByteArray before = readAll(path);
    std::vector<moe::DatabaseTrouble> asked;
    auto second = moe::openChatDatabase(path.toStdString(), dir.filePath("copies").toStdString(),
                                        [&](moe::DatabaseTrouble t, const std::string&) {
                                          asked.push_back(t);
                                          return moe::DatabaseWayOut::StartFresh;  // ignored: not unreadable
                                        });
    QVERIFY(!second.db);
    QCOMPARE(asked, std::vector<moe::DatabaseTrouble>{moe::DatabaseTrouble::InUse});
    QVERIFY2(second.error.find("already running") != std::string::npos, second.error.c_str());
    QCOMPARE(readAll(path), before);
    first.db().exec("COMMIT");
  }

  // A file the system will not let moechat write (here: immutable, which binds root
  // too, unlike file modes): reported as such, never replaced, left as it was; the
  // way out offered is to read a copy, which shows the chats (the -wal's last commit
  // included) while the original stays byte for byte as it was.
  void aReadOnlyDatabaseIsReportedAndCanBeReadFromACopy() {
    QTemporaryDir dir;
    const QString path = dir.filePath("moechat.db");
    std::optional<AppDatabase> writer(AppDatabase::open(path.toStdString()));
    writer->db().exec("PRAGMA wal_autocheckpoint=0");
    moe::ConversationStore(*writer).createConversation("in the file", "", "{}", "");
    writer->db().exec("PRAGMA wal_checkpoint(TRUNCATE)");
    moe::ConversationStore(*writer).createConversation("in the wal", "", "{}", "");
    QVERIFY(QFileInfo(path + "-wal").size() > 0);
    QProcess chattr;
    chattr.start("chattr", {"+i", path});
    if (!chattr.waitForFinished() || chattr.exitStatus() != QProcess::NormalExit || chattr.exitCode() != 0) {
      writer.reset();
      QSKIP("chattr +i is not available here (not ext4, or no CAP_LINUX_IMMUTABLE)");
    }
    const auto unlock = qScopeGuard([&] { QProcess::execute("chattr", {"-i", path}); });
    const QByteArray before = readAll(path), wal_before = readAll(path + "-wal");
    const QString copies = dir.filePath("copies");

    std::vector<moe::DatabaseTrouble> asked;
    auto refused = moe::openChatDatabase(path.toStdString(), copies.toStdString(),
                                         [&](moe::DatabaseTrouble t, const std::string&) {
                                           asked.push_back(t);
                                           return moe::DatabaseWayOut::StartFresh;  // ignored: not unreadable
                                         });
    QVERIFY(!refused.db);
    QCOMPARE(asked, std::vector<moe::DatabaseTrouble>{moe::DatabaseTrouble::ReadOnly});
    QVERIFY2(refused.error.find("not write it") != std::string::npos, refused.error.c_str());
    QCOMPARE(readAll(path), before);

    for (int start = 0; start < 2; ++start) {  // a second start replaces the first copy
      auto copy = moe::openChatDatabase(
          path.toStdString(), copies.toStdString(),
          [](moe::DatabaseTrouble, const std::string&) { return moe::DatabaseWayOut::ReadACopy; });
      QVERIFY2(copy.db.has_value(), copy.error.c_str());
      QCOMPARE(QString::fromStdString(copy.read_only_original), path);
      QVERIFY(QString::fromStdString(copy.db->path()).startsWith(copies));
      std::vector<std::string> titles;
      for (const auto& c : moe::ConversationStore(*copy.db).list()) titles.push_back(c.title);
      std::sort(titles.begin(), titles.end());
      QCOMPARE(titles, (std::vector<std::string>{"in the file", "in the wal"}));
      QCOMPARE(QDir(copies).entryList({"moechat-read-only-*.db"}).size(), 1);
    }
    QCOMPARE(readAll(path), before);
    QCOMPARE(readAll(path + "-wal"), wal_before);
  }

  void aDirectoryIsAClearError() {
    QTemporaryDir dir;
    try {
      AppDatabase::open(dir.path().toStdString());
      QFAIL("a directory was accepted");
    } catch (const AppDatabaseError& e) {
      QCOMPARE(e.kind(), AppDatabaseError::Kind::CannotOpen);
      QVERIFY2(QString(e.what()).contains("directory"), e.what());
    }
  }
};

QTEST_GUILESS_MAIN(PersistMigrationsTest)
#include "test_persist_migrations.moc"
