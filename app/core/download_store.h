// The download queue as it must survive a restart: what to fetch, where to,
// how far it got and how it ended. The downloader (app/qt) owns the transfer;
// this table only remembers it. Qt-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/core/app_database.h"

namespace moe {

struct DownloadRecord {
  int64_t id = 0;
  std::string url, dest_path, sha256 /*lowercase hex or empty*/;
  int64_t expected_size = -1, bytes_done = 0;
  std::string state /*queued|running|paused|verifying|done|failed*/, error, catalog_id;
  int64_t created_at = 0, updated_at = 0;  // Unix ms; set by the store
};

// True for the six states the table accepts.
bool isValidDownloadState(const std::string& state);

class DownloadStore {
 public:
  explicit DownloadStore(AppDatabase& db) : db_(db.db()) {}

  // Inserts rec (its id, created_at and updated_at are ignored) and returns the
  // new id. An empty state means "queued". Throws std::invalid_argument for an
  // empty url or dest_path, an unknown state, a sha256 that is not 64 hex digits
  // (upper case is accepted and stored lower case) or a negative bytes_done.
  int64_t add(const DownloadRecord& rec);

  // Each returns false when no download has this id (e.g. removed meanwhile).
  bool setState(int64_t id, const std::string& state, const std::string& error = {});
  bool setBytesDone(int64_t id, int64_t bytes_done);
  // State, progress and error in one statement (the downloader's periodic save).
  bool update(int64_t id, const std::string& state, int64_t bytes_done, const std::string& error = {});

  std::optional<DownloadRecord> get(int64_t id);
  // Every download not 'done' (failed ones included, so the UI can offer a retry), oldest first.
  std::vector<DownloadRecord> unfinished();
  std::vector<DownloadRecord> all();
  bool remove(int64_t id);

 private:
  sql::Database& db_;
};

}  // namespace moe
