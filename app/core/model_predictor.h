// Which stored predictor set belongs to a model the app opens: its file's
// SHA-256 (from the model registry, or hashed for the demo model) keys the
// predictors table. Qt-free.
#pragma once

#include <memory>
#include <string>

#include "app/core/app_database.h"
#include "app/core/demo_model.h"
#include "app/core/model_registry.h"
#include "app/core/predictor_store.h"
#include "offload/mlp_predictor.h"

namespace moe {

// The demo model's SHA-256 (the bytes are generated; computed once per process).
// The demo model's SHA-256: of `kind`, or (no argument) of the demo the app offers.
const std::string& demoModelSha256(DemoModel kind);
const std::string& demoModelSha256();

// model_path empty: the demo model. A model the registry has no hash for yet
// has no predictor (hashing a multi-GB file on open would stall the load).
std::shared_ptr<const PredictorSet> storedPredictorFor(AppDatabase& db, ModelRegistry& registry,
                                                       const std::string& model_path, int distance = 2);

// The summary of the set stored for a model (by its SHA-256) at this
// distance, or none (also for an empty hash).
std::optional<PredictorSetInfo> storedPredictorInfo(AppDatabase& db, const std::string& model_sha256,
                                                    int distance = 2);

// What a model list shows for it: "predictor 88%" (mean validation Accuracy),
// "predictor" when its accuracy is unknown, "" without one.
std::string predictorNote(const std::optional<PredictorSetInfo>& info);

}  // namespace moe
