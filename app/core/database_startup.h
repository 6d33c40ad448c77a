// The chat database at the app's start: opened, migrated and its interrupted
// replies recovered, or, when that fails, a way out that keeps the file. A file
// SQLite cannot read (damaged pages, garbage) can be set aside and replaced by a
// new, empty database; a file moechat may read but not write can be read from a
// copy (the chats shown, nothing written to the original); a file in use by another
// moechat or written by a newer one is only reported.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "app/core/app_database.h"

namespace moe {

enum class DatabaseTrouble {
  InUse,       // another process holds it: start nothing, say so
  Newer,       // a newer moechat wrote it: start nothing, say so
  ReadOnly,    // it may not be written: may be read from a copy
  Unreadable,  // damaged, foreign or not a database: may be set aside
};

// What the user chose when the file cannot be used as it is.
enum class DatabaseWayOut {
  Quit,        // start nothing
  StartFresh,  // Unreadable only: set the file aside, start a new database
  ReadACopy,   // ReadOnly only: copy it (with its -wal) to the copy folder and open the copy
};

struct DatabaseStartup {
  std::optional<AppDatabase> db;             // empty: the app cannot start on this file
  int64_t recovered_replies = 0;             // replies marked interrupted by the last stop
  std::vector<std::string> recovered_chats;  // the titles of their chats, the latest first
  std::string set_aside;                     // where the unreadable file now is, when replaced
  std::string read_only_original;            // ReadACopy: the file db is a copy of (never written)
  std::string error;                         // why db is empty
};

// What the window says about replies the last stop cut off ("A reply in “Recipes”
// was cut off when moechat last stopped; its text so far is kept.").
std::string recoveredRepliesNotice(int64_t replies, const std::vector<std::string>& chats);

// `way_out(trouble, message)` is asked once, when the file cannot be used. StartFresh
// (for Unreadable) moves it (with its -wal and -shm) to "<path>.unreadable-<time>"
// and opens a new database at path; ReadACopy (for ReadOnly) copies it to
// "<copy_folder>/moechat-read-only-<time>.db" and opens that, leaving the original
// as it was. An answer that does not fit the trouble is taken as Quit.
DatabaseStartup openChatDatabase(
    const std::string& path, const std::string& copy_folder,
    const std::function<DatabaseWayOut(DatabaseTrouble, const std::string&)>& way_out);

}  // namespace moe
