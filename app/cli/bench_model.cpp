#include "app/cli/bench_model.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "app/cli/args.h"
#include "offload/host_expert_store.h"
#include "synth/synthetic_model.h"

namespace moe::cli {
namespace {

gguf::TensorType parseQuant(const std::string& q) {
  try {
    return synth::parseWeightType(q);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--quant: ") + e.what());
  }
}

synth::SyntheticSpec specFor(const std::string& preset) {
  const std::string tiny = "tiny-";
  try {
    if (preset.rfind(tiny, 0) == 0) return synth::tinySpec(preset.substr(tiny.size()));
    return synth::presetSpec(preset);
  } catch (const std::invalid_argument&) {
    std::string names;
    for (const auto& n : synth::presetNames()) names += n + ", ";
    for (const auto& a : synth::supportedArchs()) names += tiny + a + ", ";
    names.resize(names.size() - 2);
    throw UsageError("unknown --preset '" + preset + "' (" + names + ")");
  }
}

uint64_t freeBytes(const std::filesystem::path& dir) {
  struct statvfs vfs {};
  if (statvfs(dir.c_str(), &vfs) != 0) return 0;
  return uint64_t(vfs.f_bavail) * vfs.f_frsize;
}

// Bytes of all routed experts of a spec: what the host expert store will hold.
uint64_t routedExpertBytes(const synth::SyntheticSpec& s) {
  const uint64_t one = 2 * gguf::rowBytes(s.expert_type, uint64_t(s.n_embd)) * uint64_t(s.n_ff_exp) +
                       gguf::rowBytes(s.expert_type, uint64_t(s.n_ff_exp)) * uint64_t(s.n_embd);
  return one * uint64_t(s.n_expert) * uint64_t(std::max(0, s.n_layer - s.n_leading_dense));
}

}  // namespace

std::string defaultModelCacheDir() {
  if (const char* d = std::getenv("MOECHAT_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/moechat/models";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/moechat/models";
  return ".moechat-cache";
}

PresetLayoutFile::PresetLayoutFile(const std::string& preset, const std::string& quant) {
  synth::SyntheticSpec spec = specFor(preset);
  spec.expert_type = spec.weight_type = parseQuant(quant);
  // The real shape or nothing: a width that is not whole blocks of the type is what
  // real mixes store in another type (e.g. GLM's expert width 1408 in Q5_0 or Q8_0
  // within a Q4_K_M file).
  const synth::SyntheticSpec fitted = synth::fitToBlocks(spec);
  if (fitted.n_embd != spec.n_embd || fitted.n_ff_exp != spec.n_ff_exp || fitted.n_ff != spec.n_ff ||
      fitted.head_dim != spec.head_dim || fitted.n_ff_shexp != spec.n_ff_shexp)
    throw UsageError(
        "the " + preset + " shape has widths that are not whole " + quant +
        " blocks; describe it in a type of 32-element blocks (--quant q8_0, q4_0, q5_0, mxfp4, ...)");
  path_ = (std::filesystem::temp_directory_path() /
           ("moechat-layout-" + std::to_string(::getpid()) + "-" + preset + ".gguf"))
              .string();
  synth::writeModelLayout(spec, path_);
}

PresetLayoutFile::~PresetLayoutFile() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

std::string ensurePresetModel(const std::string& preset, const std::string& quant, const std::string& dir) {
  synth::SyntheticSpec spec = specFor(preset);
  const gguf::TensorType type = parseQuant(quant);
  spec.expert_type = type;
  spec.weight_type = type;
  spec = synth::fitToBlocks(spec);
  std::string q = quant;
  std::transform(q.begin(), q.end(), q.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  const std::filesystem::path folder(dir);
  const std::filesystem::path path = folder / (preset + "-" + q + ".gguf");
  const uint64_t planned = synth::plannedFileBytes(spec);
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && std::filesystem::file_size(path, ec) >= planned) {
    std::fprintf(stderr, "bench: reusing %s (%.1f MB)\n", path.c_str(), planned / 1e6);
    return path.string();
  }
  // The bench copies every expert into host RAM: refuse before writing a file it cannot run.
  try {
    HostExpertStore::checkFits(routedExpertBytes(spec), HostExpertStore::availableRam());
  } catch (const HostMemoryError& e) {
    throw std::runtime_error("the " + preset + " " + q +
                             " model cannot be benchmarked on this machine: " + e.what());
  }
  std::filesystem::create_directories(folder, ec);
  if (ec)
    throw std::runtime_error("cannot create the model cache folder " + folder.string() + ": " + ec.message());
  // Metadata and the vocabulary add a few MB on top of the tensors.
  const uint64_t needed = planned + (64ull << 20), available = freeBytes(folder);
  if (available > 0 && needed > available)
    throw std::runtime_error("the " + preset + " " + q + " model needs " + std::to_string(needed / 1000000) +
                             " MB but " + folder.string() + " has " + std::to_string(available / 1000000) +
                             " MB free: free some space or pick a folder with --cache-dir");
  std::fprintf(stderr, "bench: generating %s (%s shape, %s, %.1f MB, random weights) ...\n", path.c_str(),
               preset.c_str(), q.c_str(), planned / 1e6);
  // Written under a temporary name and renamed: an interrupted run leaves no half file to reuse.
  const std::filesystem::path partial = path.string() + ".partial";
  synth::writeModel(spec, partial.string());
  std::filesystem::rename(partial, path);
  return path.string();
}

}  // namespace moe::cli
