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
  ConversationStore store(*out.db);
  out.recovered_chats = store.streamingChatTitles();
  out.recovered_replies = store.recoverInterrupted();
  return out;
}

std::string quoted(const std::string& title) {
  return title.empty() ? std::string("an untitled chat") : "\u201c" + title + "\u201d";
}

}  // namespace

std::string recoveredRepliesNotice(int64_t replies, const std::vector<std::string>& chats) {
  if (replies <= 0) return {};
  // "in “A”", "in “A” and “B”", "in “A”, “B” and 3 other chats"
  std::string where;
  const size_t named = chats.size() <= 3 ? chats.size() : 2;
  for (size_t i = 0; i < named; ++i) {
    const bool last = i + 1 == named && named == chats.size();
    where += (i == 0 ? "" : last ? " and " : ", ") + quoted(chats[i]);
  }
  if (named < chats.size()) where += " and " + std::to_string(chats.size() - named) + " other chats";
  const std::string in = where.empty() ? std::string() : " in " + where;
  if (replies == 1)
    return "A reply" + in + " was cut off when moechat last stopped; its text so far is kept.";
  return std::to_string(replies) + " replies" + in +
         " were cut off when moechat last stopped; their text so far is kept.";
}

namespace {

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

// Copies path (and its -wal, whose commits are part of the database) into folder.
std::string copyForReading(const std::string& path, const std::string& folder) {
  namespace fs = std::filesystem;
  fs::create_directories(folder);
  // The copies of earlier starts are only copies: one is kept at a time.
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.path().filename().string().rfind("moechat-read-only-", 0) == 0) fs::remove(entry.path());
  const std::string copy = (fs::path(folder) / ("moechat-read-only-" + timestamp() + ".db")).string();
  fs::copy_file(path, copy);
  std::error_code ec;
  if (fs::exists(path + "-wal", ec)) fs::copy_file(path + "-wal", copy + "-wal");
  // copy_file keeps the permission bits: a file read-only by its mode gives a copy
  // read-only too, which could not be opened.
  for (const std::string& file : {copy, copy + "-wal"})
    if (fs::exists(file, ec))
      fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
  return copy;
}

}  // namespace

DatabaseStartup openChatDatabase(
    const std::string& path, const std::string& copy_folder,
    const std::function<DatabaseWayOut(DatabaseTrouble, const std::string&)>& way_out) {
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
  const DatabaseWayOut choice = way_out(trouble, first_error);
  if (choice == DatabaseWayOut::StartFresh && trouble == DatabaseTrouble::Unreadable) {
    try {
      const std::string kept = setAside(path);
      out = openAndRecover(path);
      out.set_aside = kept;
    } catch (const std::exception& e) {
      out = {};
      out.error = first_error + "; a new database could not be made either: " + e.what();
    }
  } else if (choice == DatabaseWayOut::ReadACopy && trouble == DatabaseTrouble::ReadOnly) {
    try {
      out = openAndRecover(copyForReading(path, copy_folder));
      out.read_only_original = path;
    } catch (const std::exception& e) {
      out = {};
      out.error = first_error + "; a copy to read could not be made either: " + e.what();
    }
  }
  return out;
}

}  // namespace moe
