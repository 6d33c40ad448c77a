#include "app/core/model_registry.h"

#include <stdexcept>

namespace moe {

namespace {

constexpr const char* kColumns = "id, path, sha256, name, arch, quant, size_bytes, source_url, added_at";

ModelRecord readRecord(const sql::Statement& st) {
  ModelRecord r;
  r.id = st.columnInt64(0);
  r.path = st.columnText(1);
  r.sha256 = st.columnText(2);
  r.name = st.columnText(3);
  r.arch = st.columnText(4);
  r.quant = st.columnText(5);
  r.size_bytes = st.columnInt64(6);
  r.source_url = st.columnText(7);
  r.added_at = st.columnInt64(8);
  return r;
}

bool isHexDigit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

}  // namespace

std::string normalizeSha256(const std::string& hex) {
  if (hex.empty()) return hex;
  if (hex.size() != 64) throw std::invalid_argument("sha256 '" + hex + "' is not 64 hex digits");
  std::string out = hex;
  for (char& c : out) {
    if (!isHexDigit(c)) throw std::invalid_argument("sha256 '" + hex + "' is not 64 hex digits");
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

int64_t ModelRegistry::upsert(const ModelRecord& rec) {
  if (rec.path.empty()) throw std::invalid_argument("model path is empty");
  std::string sha = normalizeSha256(rec.sha256);
  // ON CONFLICT keeps the row (its id and added_at) and refreshes the rest.
  auto st = db_.prepare(
      "INSERT INTO models (path, sha256, name, arch, quant, size_bytes, source_url, added_at) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
      "ON CONFLICT (path) DO UPDATE SET sha256 = excluded.sha256, name = excluded.name, "
      "arch = excluded.arch, quant = excluded.quant, size_bytes = excluded.size_bytes, "
      "source_url = excluded.source_url RETURNING id");
  st.bindText(1, rec.path).bindText(2, sha).bindText(3, rec.name).bindText(4, rec.arch);
  st.bindText(5, rec.quant).bindInt64(6, rec.size_bytes).bindText(7, rec.source_url);
  st.bindInt64(8, unixMillisNow());
  if (!st.step()) throw std::logic_error("model upsert returned no id");
  int64_t id = st.columnInt64(0);
  st.run();
  return id;
}

std::vector<ModelRecord> ModelRegistry::list() {
  auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM models ORDER BY name, path");
  std::vector<ModelRecord> out;
  while (st.step()) out.push_back(readRecord(st));
  return out;
}

std::optional<ModelRecord> ModelRegistry::findByPath(const std::string& path) {
  auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM models WHERE path = ?1");
  st.bindText(1, path);
  if (!st.step()) return std::nullopt;
  return readRecord(st);
}

std::vector<ModelRecord> ModelRegistry::findBySha256(const std::string& sha256) {
  std::string sha = normalizeSha256(sha256);
  std::vector<ModelRecord> out;
  if (sha.empty()) return out;  // "not hashed yet" is not a content match
  auto st = db_.prepare(std::string("SELECT ") + kColumns + " FROM models WHERE sha256 = ?1 ORDER BY id");
  st.bindText(1, sha);
  while (st.step()) out.push_back(readRecord(st));
  return out;
}

bool ModelRegistry::remove(int64_t id) {
  auto st = db_.prepare("DELETE FROM models WHERE id = ?1");
  st.bindInt64(1, id);
  st.run();
  return db_.changes() > 0;
}

}  // namespace moe
