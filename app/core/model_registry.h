// The model files the user has installed (downloaded or picked on disk), keyed
// by path; the sha256 links a file to its trained predictors. Qt-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/core/app_database.h"

namespace moe {

struct ModelRecord {
  int64_t id = 0;
  std::string path;
  std::string sha256;  // lowercase hex, or empty until hashed
  std::string name, arch, quant;
  int64_t size_bytes = 0;
  std::string source_url;  // empty for a local file
  int64_t added_at = 0;    // Unix ms; set by the store on first insert
};

class ModelRegistry {
 public:
  explicit ModelRegistry(AppDatabase& db) : db_(db.db()) {}

  // Inserts, or updates the row with the same path (keeping its id and
  // added_at). Returns the id. Throws std::invalid_argument for an empty path
  // or a sha256 that is not 64 hex digits (stored lower case).
  int64_t upsert(const ModelRecord& rec);
  // All models, by name then path.
  std::vector<ModelRecord> list();
  std::optional<ModelRecord> findByPath(const std::string& path);
  // Every file with this content (the same model may sit at two paths).
  std::vector<ModelRecord> findBySha256(const std::string& sha256);
  bool remove(int64_t id);

 private:
  sql::Database& db_;
};

// "" stays "", 64 hex digits come back lower case; anything else throws std::invalid_argument.
std::string normalizeSha256(const std::string& hex);

}  // namespace moe
