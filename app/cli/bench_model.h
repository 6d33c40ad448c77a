// `bench --preset P --quant Q`: a full-size synthetic model of a real model's
// shape (synth/synthetic_model.h presets; "tiny-<arch>" for a quick one),
// generated once into a cache folder and reused by later runs.
#pragma once

#include <string>

namespace moe::cli {

// The folder bench keeps generated models in: MOECHAT_CACHE_DIR, else
// $XDG_CACHE_HOME/moechat/models, else ~/.cache/moechat/models.
std::string defaultModelCacheDir();

// Path of the model file for (preset, quant) in `dir`, generated first when it is
// missing (after checking the folder's free space; a clear error when it does not
// fit). quant: any type of quant::kComputeTypes (any case); widths are rounded up
// to whole blocks (synth::fitToBlocks). Throws UsageError for an
// unknown preset or quant, std::runtime_error for too little disk space.
std::string ensurePresetModel(const std::string& preset, const std::string& quant, const std::string& dir);

// A preset's layout (header and a sparse data section) written to a temporary
// file for `info --preset`; removed when the returned object goes.
class PresetLayoutFile {
 public:
  PresetLayoutFile(const std::string& preset, const std::string& quant);
  ~PresetLayoutFile();
  PresetLayoutFile(const PresetLayoutFile&) = delete;
  PresetLayoutFile& operator=(const PresetLayoutFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace moe::cli
