// A model's shape and sizes without running it, for load plans (app/core/load_plan.h)
// in the settings panel and the models view (the model wizard's catalog uses presets).
#pragma once

#include <string>

#include "app/core/demo_model.h"
#include "inference/model.h"
#include "inference/model_config.h"
#include "offload/fit_estimate.h"

namespace moe {

struct ModelShape {
  ModelConfig config;
  ModelSizes sizes;
  uint64_t host_store_bytes = 0;  // pinned host RAM the expert store needs
};

// The shape of a model already loaded (the engine worker hands it to the UI with
// the loaded model's info, so the UI never opens the file itself).
ModelShape shapeOf(const Model& model);

// Opens the file to describe it (a model not loaded: the models view's list).
// path empty + demo: the embedded demo model. Throws with a readable reason.
ModelShape describeModel(const std::string& path, bool demo, DemoModel demo_model = DemoModel::kRandom);

}  // namespace moe
