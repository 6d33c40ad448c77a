#include "app/core/database_startup.h"

#include <chrono>
#include <ctime>
#include <filesystem>

#include "app/core/conversation_store.h"
#include "app/core/sqlite_db.h"

#include <sqlite3.h>

namespace moe {
namespace {

// Opens and recovers; throws what either step threw.
DatabaseStartup openAndRecover(const std::string& path) {
  DatabaseStartup out;
  out.db.emplace(AppDatabase::open(path));
  out.recovered_replies = ConversationStore(*out.db).recoverInterrupted();
  return out;
}

DatabaseTrouble classify(const std::exception& e) {
  if (const auto* a = dynamic_cast<const AppDatabaseError*>(&e)) {
    if (a->kind() == AppDatabaseError::Kind::InUse) return DatabaseTrouble::InUse;
    if (a->kind() == AppDatabaseError::Kind::NewerSchema) return DatabaseTrouble::Newer;
    if (a->kind() == AppDatabaseError::Kind::ReadOnly) return DatabaseTrouble::ReadOnly;
  }
  if (const auto* s = dynamic_cast<const sql::SqliteError*>(&e))
    if (s->primaryCode() == SQLITE_BUSY || s->primaryCode() == SQLITE_LOCKED) return DatabaseTrouble::InUse;
  return DatabaseTrouble::Unreadable;
}

std::string timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

// Moves path and its WAL companions to path + suffix; returns the new main path.
std::string setAside(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string suffix = ".unreadable-" + timestamp();
  for (const char* companion : {"-wal", "-shm"}) {
    std::error_code ec;
    if (fs::exists(path + companion, ec)) fs::rename(path + companion, path + suffix + companion);
  }
  fs::rename(path, path + suffix);
  return path + suffix;
}

}  // namespace

DatabaseStartup openChatDatabase(
    const std::string& path, const std::function<bool(DatabaseTrouble, const std::string&)>& start_fresh) {
  std::string first_error;
  DatabaseTrouble trouble = DatabaseTrouble::Unreadable;
  try {
    return openAndRecover(path);
  } catch (const std::exception& e) {
    first_error = e.what();
    trouble = classify(e);
  }
  DatabaseStartup out;
  out.error = first_error;
  if (!start_fresh(trouble, first_error) || trouble != DatabaseTrouble::Unreadable) return out;
  try {
    const std::string kept = setAside(path);
    out = openAndRecover(path);
    out.set_aside = kept;
  } catch (const std::exception& e) {
    out = {};
    out.error = first_error + "; a new database could not be made either: " + e.what();
  }
  return out;
}

}  // namespace moe
