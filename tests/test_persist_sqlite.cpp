// The RAII wrapper over the sqlite3 C API on a real file: every bind type,
// statement reuse after an error, errors that name the SQL, transactions that
// roll back unless committed.
#include <QtTest>

#include <QTemporaryDir>

#include "app/core/sqlite_db.h"

class PersistSqliteTest : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  std::string dbPath(const char* name) { return dir_.filePath(name).toStdString(); }

 private slots:
  void sqliteWrapperBindsStepsAndRollsBack() {
    namespace sql = moe::sql;
    sql::Database db(dbPath("wrapper.db"));
    db.exec("CREATE TABLE t (i INTEGER, d REAL, s TEXT, b BLOB, n TEXT UNIQUE)");
    const std::string with_nul("a\0b", 3);
    const std::vector<uint8_t> blob = {0, 1, 2, 255};
    auto ins = db.prepare("INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5)");
    ins.bindInt64(1, INT64_MIN).bindDouble(2, 0.1).bindText(3, with_nul).bindBlob(4, blob).bindNull(5);
    ins.run();
    ins.reset();  // bindings cleared too: all NULL now
    ins.run();
    ins.reset();
    ins.bindInt64(1, 7).bindBlob(4, {}).bindText(5, "k");
    ins.run();

    auto sel = db.prepare("SELECT i, d, s, b, n FROM t ORDER BY rowid");
    QVERIFY(sel.step());
    QCOMPARE(sel.columnCount(), 5);
    QCOMPARE(sel.columnInt64(0), INT64_MIN);
    QCOMPARE(sel.columnDouble(1), 0.1);
    QCOMPARE(sel.columnText(2), with_nul);  // embedded NUL kept
    QCOMPARE(sel.columnBlob(3), blob);
    QVERIFY(sel.isNull(4));
    QVERIFY(sel.step());
    QVERIFY(sel.isNull(0) && sel.isNull(3));
    QVERIFY(sel.step());
    QVERIFY(!sel.isNull(3));  // an empty blob is not NULL
    QVERIFY(sel.columnBlob(3).empty());
    QVERIFY(!sel.step());

    // Errors carry SQLite's message and the SQL that failed.
    try {
      db.exec("SELEKT 1");
      QFAIL("a syntax error was not reported");
    } catch (const sql::SqliteError& e) {
      QVERIFY2(QString(e.what()).contains("syntax error"), e.what());
      QCOMPARE(e.sql(), std::string("SELEKT 1"));
    }
    // A constraint violation leaves the statement usable.
    auto dup = db.prepare("INSERT INTO t (n) VALUES (?1)");
    dup.bindText(1, "k");
    QVERIFY_THROWS_EXCEPTION(sql::SqliteError, dup.run());
    dup.reset();
    dup.bindText(1, "fresh");
    dup.run();

    const int64_t rows = db.queryInt64("SELECT count(*) FROM t");
    {
      sql::Transaction tx(db);  // destroyed without commit: rolled back
      db.exec("INSERT INTO t (i) VALUES (1)");
      QVERIFY(db.inTransaction());
    }
    QVERIFY(!db.inTransaction());
    QCOMPARE(db.queryInt64("SELECT count(*) FROM t"), rows);
    try {
      sql::Transaction tx(db);
      db.exec("INSERT INTO t (i) VALUES (1)");
      throw std::runtime_error("fails half-way");
    } catch (const std::runtime_error&) {
    }
    QCOMPARE(db.queryInt64("SELECT count(*) FROM t"), rows);
    {
      sql::Transaction tx(db);
      db.exec("INSERT INTO t (i) VALUES (1)");
      tx.commit();
    }
    QCOMPARE(db.queryInt64("SELECT count(*) FROM t"), rows + 1);
    QVERIFY_THROWS_EXCEPTION(sql::SqliteError,
                             sql::Database("/nonexistent-dir/x/y.db", sql::Database::Mode::ReadWrite));
  }
};

QTEST_GUILESS_MAIN(PersistSqliteTest)
#include "test_persist_sqlite.moc"
