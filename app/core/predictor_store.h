// Trained expert predictors in the app database (schema v3's `predictors`
// table): one row per layer of a set, keyed by the model file's SHA-256, the
// layer, the distance and the blob format version, so that opening a model
// finds its predictor. Export/import of a set as one file (the format `moechat-cli
// train` writes) lets users share predictors for the same GGUF. Qt-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/core/app_database.h"
#include "offload/mlp_predictor.h"

namespace moe {

struct PredictorSetInfo {
  std::string model_sha256;
  int distance = 0;
  int layers = 0;
  std::string trained_on;
  int64_t token_count = 0;
  double mean_accuracy = -1;  // mean validation Accuracy over the layers, -1 when unknown
  int64_t created_at = 0;     // Unix ms
};

class PredictorStore {
 public:
  explicit PredictorStore(AppDatabase& db) : db_(db.db()) {}

  // Stores the set in one transaction, replacing a set of the same model and
  // distance (all its layers). Throws std::invalid_argument for a set without
  // layers or a model hash that is not 64 hex digits.
  void save(const PredictorSet& set);
  // The stored set of this model and distance, or none. Blobs come back
  // byte for byte; the prompt split is not kept in the database.
  std::optional<PredictorSet> load(const std::string& model_sha256, int distance = 2);
  // The sets stored for a model (one per distance).
  std::vector<PredictorSetInfo> list(const std::string& model_sha256);
  // Removes a model's set of this distance; returns the rows removed.
  int remove(const std::string& model_sha256, int distance);

  // Writes the stored set to `path` (throws std::runtime_error when there is none).
  void exportSet(const std::string& model_sha256, int distance, const std::string& path);
  // Reads a set file and stores it; returns it. Throws PredictorFormatError for
  // a damaged file.
  PredictorSet importSet(const std::string& path);

 private:
  sql::Database& db_;
};

}  // namespace moe
