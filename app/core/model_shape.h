// A model's shape and sizes without running it, for fit estimates in the
// settings panel (the model wizard uses the catalog's presets instead).
#pragma once

#include <string>

#include "inference/model.h"
#include "inference/model_config.h"
#include "offload/fit_estimate.h"

namespace moe {

struct ModelShape {
  ModelConfig config;
  ModelSizes sizes;
  uint64_t host_store_bytes = 0;  // pinned host RAM the expert store needs
};

// path empty + demo: the embedded demo model. Throws with a readable reason.
ModelShape describeModel(const std::string& path, bool demo);

}  // namespace moe
