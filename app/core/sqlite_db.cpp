#include "app/core/sqlite_db.h"

#include <sqlite3.h>

#include <utility>

namespace moe::sql {

namespace {

std::string describe(int code, const char* detail) {
  std::string msg = detail ? detail : sqlite3_errstr(code);
  const char* generic = sqlite3_errstr(code);
  if (generic && msg != generic) msg += std::string(" (") + generic + ")";
  return msg;
}

// A connection's current message, or the generic one for the code.
std::string messageOf(sqlite3* db, int code) { return describe(code, db ? sqlite3_errmsg(db) : nullptr); }

std::string shortSql(std::string_view sql) {
  constexpr size_t kMax = 400;
  if (sql.size() <= kMax) return std::string(sql);
  return std::string(sql.substr(0, kMax)) + "...";
}

}  // namespace

SqliteError::SqliteError(int code, const std::string& message, std::string sql)
    : std::runtime_error(sql.empty() ? "sqlite: " + message : "sqlite: " + message + " [in: " + sql + "]"),
      code_(code),
      sql_(std::move(sql)) {}

// ---- Database ----

Database::Database(const std::string& path, Mode mode) : path_(path) {
  // Serialized: a connection misused from two threads stays memory-safe. Still,
  // give each thread its own connection: a transaction belongs to a connection.
  int flags = SQLITE_OPEN_FULLMUTEX;
  switch (mode) {
    case Mode::ReadWriteCreate: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE; break;
    case Mode::ReadWrite: flags |= SQLITE_OPEN_READWRITE; break;
    case Mode::ReadOnly: flags |= SQLITE_OPEN_READONLY; break;
  }
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = messageOf(db_, rc);
    close();
    throw SqliteError(rc, "cannot open '" + path + "': " + msg);
  }
  sqlite3_extended_result_codes(db_, 1);
}

Database::~Database() { close(); }

Database::Database(Database&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Database& Database::operator=(Database&& other) noexcept {
  if (this != &other) {
    close();
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

void Database::close() noexcept {
  // sqlite3_close_v2 defers the close until outstanding statements are finalized.
  if (db_) sqlite3_close_v2(db_);
  db_ = nullptr;
}

void Database::setBusyTimeout(int milliseconds) {
  int rc = sqlite3_busy_timeout(db_, milliseconds);
  if (rc != SQLITE_OK) throw SqliteError(rc, messageOf(db_, rc));
}

void Database::exec(std::string_view sql) {
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = describe(rc, err);
    sqlite3_free(err);
    throw SqliteError(rc, msg, shortSql(sql));
  }
}

Statement Database::prepare(std::string_view sql) { return Statement(*this, sql); }

int64_t Database::queryInt64(std::string_view sql) {
  Statement st(*this, sql);
  if (!st.step()) throw SqliteError(SQLITE_ERROR, "query returned no row", shortSql(sql));
  return st.columnInt64(0);
}

std::string Database::queryText(std::string_view sql) {
  Statement st(*this, sql);
  if (!st.step()) throw SqliteError(SQLITE_ERROR, "query returned no row", shortSql(sql));
  return st.columnText(0);
}

int64_t Database::lastInsertRowid() const { return sqlite3_last_insert_rowid(db_); }
int64_t Database::changes() const { return sqlite3_changes64(db_); }
bool Database::inTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

// ---- Statement ----

Statement::Statement(Database& db, std::string_view sql) : db_(db.handle()), sql_(sql) {
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql_.data(), static_cast<int>(sql_.size()), &stmt_, &tail);
  if (rc != SQLITE_OK) throw SqliteError(rc, messageOf(db_, rc), shortSql(sql_));
  if (!stmt_) throw SqliteError(SQLITE_MISUSE, "empty statement", shortSql(sql_));
}

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)), sql_(std::move(other.sql_)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_) sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = std::exchange(other.stmt_, nullptr);
    sql_ = std::move(other.sql_);
  }
  return *this;
}

void Statement::check(int rc) const {
  if (rc != SQLITE_OK) throw SqliteError(rc, messageOf(db_, rc), shortSql(sql_));
}

Statement& Statement::bindInt64(int index, int64_t value) {
  check(sqlite3_bind_int64(stmt_, index, value));
  return *this;
}

Statement& Statement::bindDouble(int index, double value) {
  check(sqlite3_bind_double(stmt_, index, value));
  return *this;
}

Statement& Statement::bindText(int index, std::string_view value) {
  check(sqlite3_bind_text64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
  return *this;
}

Statement& Statement::bindBlob(int index, std::span<const uint8_t> value) {
  // A zero-length blob with a null pointer would bind NULL; bind an empty blob instead.
  if (value.empty()) {
    check(sqlite3_bind_zeroblob(stmt_, index, 0));
  } else {
    check(sqlite3_bind_blob64(stmt_, index, value.data(), value.size(), SQLITE_TRANSIENT));
  }
  return *this;
}

Statement& Statement::bindNull(int index) {
  check(sqlite3_bind_null(stmt_, index));
  return *this;
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // Leave the statement reusable after an error (e.g. a constraint violation).
  sqlite3_reset(stmt_);
  throw SqliteError(rc, messageOf(db_, rc), shortSql(sql_));
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);  // its return code repeats the last step's error, already reported
  sqlite3_clear_bindings(stmt_);
}

int Statement::columnCount() const { return sqlite3_column_count(stmt_); }
bool Statement::isNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
int64_t Statement::columnInt64(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::columnDouble(int column) const { return sqlite3_column_double(stmt_, column); }

std::string Statement::columnText(int column) const {
  const unsigned char* p = sqlite3_column_text(stmt_, column);
  int n = sqlite3_column_bytes(stmt_, column);  // after _text, as the API requires
  if (!p) return {};
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
}

std::vector<uint8_t> Statement::columnBlob(int column) const {
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, column));
  int n = sqlite3_column_bytes(stmt_, column);
  if (!p || n <= 0) return {};
  return std::vector<uint8_t>(p, p + n);
}

// ---- Transaction ----

Transaction::Transaction(Database& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (done_) return;
  // A failed COMMIT or a statement error may already have ended the transaction.
  if (db_.inTransaction()) sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace moe::sql
