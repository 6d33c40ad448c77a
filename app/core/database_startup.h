// The chat database at the app's start: opened, migrated and its interrupted
// replies recovered, or, when that fails, a way out that keeps the file. A file
// SQLite cannot read (damaged pages, garbage) can be set aside and replaced by a
// new, empty database; a file in use by another moechat, written by a newer one or
// not writable is only reported.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "app/core/app_database.h"

namespace moe {

enum class DatabaseTrouble {
  InUse,       // another process holds it: start nothing, say so
  Newer,       // a newer moechat wrote it: start nothing, say so
  ReadOnly,    // it may not be written: start nothing, say so
  Unreadable,  // damaged, foreign or not a database: may be set aside
};

struct DatabaseStartup {
  std::optional<AppDatabase> db;  // empty: the app cannot start on this file
  int64_t recovered_replies = 0;  // replies marked interrupted by the last stop
  std::string set_aside;          // where the unreadable file now is, when replaced
  std::string error;              // why db is empty
};

// `start_fresh(trouble, message)` is asked once, when the file cannot be used; for
// Unreadable, true moves it (with its -wal and -shm) to "<path>.unreadable-<time>"
// and opens a new database at path. Its answer is ignored for the other troubles.
DatabaseStartup openChatDatabase(const std::string& path,
                                 const std::function<bool(DatabaseTrouble, const std::string&)>& start_fresh);

}  // namespace moe
