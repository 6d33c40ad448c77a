#include "app/core/download_store.h"

#include <array>
#include <stdexcept>

#include "app/core/model_registry.h"

namespace moe {

namespace {

constexpr const char* kColumns =
    "id, url, dest_path, sha256, expected_size, bytes_done, state, error, catalog_id, created_at, updated_at";

DownloadRecord readRecord(const sql::Statement& st) {
  DownloadRecord r;
  r.id = st.columnInt64(0);
  r.url = st.columnText(1);
  r.dest_path = st.columnText(2);
  r.sha256 = st.columnText(3);
  r.expected_size = st.columnInt64(4);
  r.bytes_done = st.columnInt64(5);
  r.state = st.columnText(6);
  r.error = st.columnText(7);
  r.catalog_id = st.columnText(8);
  r.created_at = st.columnInt64(9);
  r.updated_at = st.columnInt64(10);
  return r;
}

void requireState(const std::string& state) {
  if (!isValidDownloadState(state))
    throw std::invalid_argument("download state '" + state + "' is not valid");
}

void requireBytes(int64_t bytes_done) {
  if (bytes_done < 0) throw std::invalid_argument("download bytes_done is negative");
}

std::vector<DownloadRecord> readAll(sql::Statement& st) {
  std::vector<DownloadRecord> out;
  while (st.step()) out.push_back(readRecord(st));
  return out;
}

}  // namespace

bool isValidDownloadState(const std::string& state) {
  static constexpr std::array<const char*, 6> kStates = {"queued",    "running", "paused",
                                                         "verifying", "done",    "failed"};
  for (const char* s : kStates)
    if (state == s) return true;
  return false;
}

int64_t DownloadStore::add(const DownloadRecord& rec) {
  if (rec.url.empty()) throw std::invalid_argument("download url is empty");
  if (rec.dest_path.empty()) throw std::invalid_argument("download dest_path is empty");
  std::string state = rec.state.empty() ? "queued" : rec.state;
  requireState(state);
  requireBytes(rec.bytes_done);
  std::string sha = normalizeSha256(rec.sha256);
  int64_t now = unixMillisNow();
  auto st = db_.prepare(
      "INSERT INTO downloads (url, dest_path, sha256, expected_size, bytes_done, state, error, catalog_id, "
      "created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)");
  st.bindText(1, rec.url).bindText(2, rec.dest_path).bindText(3, sha);
  st.bindInt64(4, rec.expected_size < 0 ? -1 : rec.expected_size).bindInt64(5, rec.bytes_done);
  st.bindText(6, state).bindText(7, rec.error).bindText(8, rec.catalog_id).bindInt64(9, now);
  st.run();
  return db_.lastInsertRowid();
}

bool DownloadStore::setState(int64_t id, const std::string& state, const std::string& error) {
  requireState(state);
  auto st = db_.prepare("UPDATE downloads SET state = ?2, error = ?3, updated_at = ?4 WHERE id = ?1");
  st.bindInt64(1, id).bindText(2, state).bindText(3, error).bindInt64(4, unixMillisNow());
  st.run();
  return db_.changes() > 0;
}

bool DownloadStore::setBytesDone(int64_t id, int64_t bytes_done) {
  requireBytes(bytes_done);
  auto st = db_.prepare("UPDATE downloads SET bytes_done = ?2, updated_at = ?3 WHERE id = ?1");
  st.bindInt64(1, id).bindInt64(2, bytes_done).bindInt64(3, unixMillisNow());
  st.run();
  return db_.changes() > 0;
}

bool DownloadStore::update(int64_t id, const std::string& state, int64_t bytes_done,
                           const std::string& error) {
  requireState(state);
  requireBytes(bytes_done);
  auto st = db_.prepare(
      "UPDATE downloads SET state = ?2, bytes_done = ?3, error = ?4, updated_at = ?5 WHERE id = ?1");
  st.bindInt64(1, id).bindText(2, state).bindInt64(3, bytes_done).bindText(4, error);
  st.bindInt64(5, unixMillisNow());
  st.run();
  return db_.changes() > 0;
}

std::optional<DownloadRecord> DownloadStore::get(int64_t id) {
  auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM downloads WHERE id = ?1");
  st.bindInt64(1, id);
  if (!st.step()) return std::nullopt;
  return readRecord(st);
}

std::vector<DownloadRecord> DownloadStore::unfinished() {
  auto st =
      db_.prepare(std::string("SELECT ") + kColumns + " FROM downloads WHERE state <> 'done' ORDER BY id");
  return readAll(st);
}

std::vector<DownloadRecord> DownloadStore::all() {
  auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM downloads ORDER BY id");
  return readAll(st);
}

bool DownloadStore::remove(int64_t id) {
  auto st = db_.prepare("DELETE FROM downloads WHERE id = ?1");
  st.bindInt64(1, id);
  st.run();
  return db_.changes() > 0;
}

}  // namespace moe
