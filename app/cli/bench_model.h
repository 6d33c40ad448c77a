// `bench --preset P --quant Q`: a full-size synthetic model of a real model's
// shape (models/synthetic_model.h presets; "tiny-<arch>" for a quick one),
// generated once into a cache folder and reused by later runs.
#pragma once

#include <string>

namespace moe::cli {

// The folder bench keeps generated models in: MOECHAT_CACHE_DIR, else
// $XDG_CACHE_HOME/moechat/models, else ~/.cache/moechat/models.
std::string defaultModelCacheDir();

// Path of the model file for (preset, quant) in `dir`, generated first when it is
// missing (after checking the folder's free space; a clear error when it does not
// fit). quant: f32, f16, bf16, q8_0, q4_0 (any case). Throws UsageError for an
// unknown preset or quant, std::runtime_error for too little disk space.
std::string ensurePresetModel(const std::string& preset, const std::string& quant, const std::string& dir);

}  // namespace moe::cli
