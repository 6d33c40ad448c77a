// A thin RAII wrapper over the sqlite3 C API: a connection (Database), a
// prepared statement (Statement), a write transaction (Transaction) and the
// one exception type they throw (SqliteError). Qt-free; used by the app's
// stores and by headless tools. Give each thread its own Database (a
// transaction belongs to a connection, not to a thread).
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace moe::sql {

// Carries SQLite's (extended) result code, its message and the SQL that failed.
class SqliteError : public std::runtime_error {
 public:
  SqliteError(int code, const std::string& message, std::string sql = {});
  int code() const { return code_; }
  // The primary result code (SQLITE_BUSY, SQLITE_NOTADB, ...), without the extended bits.
  int primaryCode() const { return code_ & 0xff; }
  const std::string& sql() const { return sql_; }

 private:
  int code_;
  std::string sql_;
};

class Statement;

class Database {
 public:
  enum class Mode { ReadWriteCreate, ReadWrite, ReadOnly };

  // Opening does not read the file yet: a file that is not a database is only
  // detected by the first statement that touches it (SQLITE_NOTADB).
  explicit Database(const std::string& path, Mode mode = Mode::ReadWriteCreate);
  ~Database();
  Database(Database&& other) noexcept;
  Database& operator=(Database&& other) noexcept;
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  void setBusyTimeout(int milliseconds);
  // Runs one or more ';'-separated statements that return no rows of interest.
  void exec(std::string_view sql);
  Statement prepare(std::string_view sql);
  // Runs a statement and returns the first column of its first row as int64
  // (e.g. "PRAGMA user_version"). Throws when there is no row.
  int64_t queryInt64(std::string_view sql);
  std::string queryText(std::string_view sql);

  int64_t lastInsertRowid() const;
  // Rows changed by the last INSERT/UPDATE/DELETE on this connection.
  int64_t changes() const;
  bool inTransaction() const;
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

 private:
  void close() noexcept;
  sqlite3* db_ = nullptr;
  std::string path_;
};

// A prepared statement. Parameters are 1-based (as in SQL's ?1), columns 0-based.
class Statement {
 public:
  Statement(Database& db, std::string_view sql);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bindInt64(int index, int64_t value);
  Statement& bindDouble(int index, double value);
  Statement& bindText(int index, std::string_view value);  // copied; embedded NULs kept
  Statement& bindBlob(int index, std::span<const uint8_t> value);
  Statement& bindNull(int index);

  // Advances one row: true while a row is available, false when done.
  bool step();
  // Steps to completion, for statements whose rows are not wanted.
  void run();
  // Ready to run again; bindings are cleared as well.
  void reset();

  int columnCount() const;
  bool isNull(int column) const;
  int64_t columnInt64(int column) const;
  double columnDouble(int column) const;
  std::string columnText(int column) const;  // NULL reads as ""
  std::vector<uint8_t> columnBlob(int column) const;

  const std::string& sql() const { return sql_; }

 private:
  void check(int rc) const;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

// BEGIN IMMEDIATE on construction (takes the write lock at once, so a busy
// database fails here and not half-way through); commit() makes it durable;
// the destructor rolls back anything not committed (an exception unwinding
// through it leaves the database as it was).
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void commit();

 private:
  Database& db_;
  bool done_ = false;
};

}  // namespace moe::sql
