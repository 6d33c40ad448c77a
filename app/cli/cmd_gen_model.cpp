// gen-model: write a synthetic GGUF MoE model (random weights, real structure).
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "synth/synthetic_model.h"

namespace moe::cli {
namespace {

gguf::TensorType parseType(const std::string& s) {
  try {
    return synth::parseWeightType(s);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// An architecture, or a variant of one's tiny model (synth::tinyVariantNames).
std::string knownArch(const std::string& arch) {
  auto archs = synth::supportedArchs();
  for (const auto& v : synth::tinyVariantNames()) archs.push_back(v);
  if (std::find(archs.begin(), archs.end(), arch) == archs.end())
    throw UsageError("unknown architecture '" + arch + "' for --arch; valid: " + joined(archs));
  return arch;
}

std::string knownPreset(const std::string& preset) {
  const auto presets = synth::presetNames();
  if (std::find(presets.begin(), presets.end(), preset) == presets.end())
    throw UsageError("unknown preset '" + preset + "' for --preset; valid: " + joined(presets));
  return preset;
}

}  // namespace

int runGenModel(const std::vector<std::string>& argv) {
  const Args args(argv,
                  {"--arch", "--preset", "--seed", "--expert-type", "--down-type", "--weight-type",
                   "--output", "--layers", "--experts", "--experts-used", "--routing"},
                  {"--demo"}, {{"-o", "--output"}});
  synth::SyntheticSpec spec;
  const int chosen = int(args.value("--arch").has_value()) + int(args.value("--preset").has_value()) +
                     int(args.flag("--demo"));
  if (chosen != 1)
    throw UsageError("choose exactly one of --arch (" + joined(synth::supportedArchs()) + "), --preset (" +
                     joined(synth::presetNames()) + ") or --demo");
  if (auto a = args.value("--arch"))
    spec = synth::tinySpec(knownArch(*a));
  else if (auto p = args.value("--preset"))
    spec = synth::presetSpec(knownPreset(*p));
  else
    spec = synth::demoSpec();
  spec.seed = args.uint64Or("--seed", spec.seed);
  if (auto t = args.value("--expert-type")) spec.expert_type = parseType(*t);
  if (auto t = args.value("--down-type")) spec.expert_down_type = parseType(*t);
  if (auto t = args.value("--weight-type")) spec.weight_type = parseType(*t);
  spec.n_layer = args.intOr("--layers", spec.n_layer);
  spec.n_expert = args.intOr("--experts", spec.n_expert);
  spec.n_expert_used = args.intOr("--experts-used", spec.n_expert_used);
  if (auto r = args.value("--routing")) {
    if (*r != synth::kRealisticRouting && *r != "router")
      throw UsageError(
          "--routing realistic (routes as a real model does) or router (the random router's own)");
    spec.realistic_routing = *r == synth::kRealisticRouting;
  }
  if (spec.n_layer < 1 || spec.n_layer > 256 || spec.n_expert < 1 || spec.n_expert > 1024 ||
      spec.n_expert_used < 1 || spec.n_expert_used > spec.n_expert)
    throw UsageError("--layers 1..256, --experts 1..1024, --experts-used 1..experts");
  // K-quant rows are blocks of 256: a tiny spec gets wider where its rows would not fit.
  const synth::SyntheticSpec fitted = synth::fitToBlocks(spec);
  if (fitted.n_embd != spec.n_embd || fitted.n_ff_exp != spec.n_ff_exp || fitted.head_dim != spec.head_dim ||
      fitted.n_ff != spec.n_ff || fitted.n_ff_shexp != spec.n_ff_shexp)
    std::fprintf(stderr, "widened for whole blocks: n_embd %d, n_ff_exp %d, head_dim %d\n", fitted.n_embd,
                 fitted.n_ff_exp, fitted.head_dim);
  spec = fitted;
  const auto out = args.value("--output");
  if (!out) throw UsageError("give the output file with -o FILE");

  const uint64_t bytes = synth::plannedFileBytes(spec);
  const auto dir = std::filesystem::absolute(*out).parent_path();
  struct statvfs vfs {};
  if (statvfs(dir.c_str(), &vfs) == 0) {
    const uint64_t avail = uint64_t(vfs.f_bavail) * vfs.f_frsize;
    if (bytes > avail)
      throw std::runtime_error("the model needs " + std::to_string(bytes / 1000000) + " MB but " +
                               dir.string() + " has " + std::to_string(avail / 1000000) + " MB free");
  }
  std::fprintf(stderr,
               "writing %s: %s, %d layers, %d experts (top-%d), %.1f MB, random weights (seed %llu)%s\n",
               out->c_str(), spec.arch.c_str(), spec.n_layer, spec.n_expert, spec.n_expert_used, bytes / 1e6,
               (unsigned long long)spec.seed, spec.realistic_routing ? ", realistic routing" : "");
  synth::writeModel(spec, *out);
  return 0;
}

}  // namespace moe::cli
