#include "app/cli/model_options.h"

#include <cstdio>

#include "app/core/demo_model.h"

namespace moe::cli {

std::set<std::string> modelValueOptions() { return {"--ctx", "--threads", "--backend", "--kv"}; }
std::set<std::string> modelFlags() { return {"--demo", "--demo-random"}; }
std::set<std::string> samplingValueOptions() {
  return {"--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n", "--seed"};
}

SessionOptions sessionOptions(const Args& args) {
  SessionOptions o;
  const bool trained = args.flag("--demo"), random = args.flag("--demo-random");
  if (trained && random) throw UsageError("--demo and --demo-random are exclusive");
  if ((trained || random) && !args.positionals().empty())
    throw UsageError(std::string(trained ? "--demo" : "--demo-random") + " and a model file '" +
                     args.positionals().front() + "' are exclusive");
  if (trained || random) {
    o.demo = true;
    o.demo_model = trained ? DemoModel::kTrained : DemoModel::kRandom;
    if (trained) requireTrainedDemoModel();  // a missing file: exit 1 with where it looked, before any work
  } else {
    if (args.positionals().empty()) throw UsageError("no model given: pass a GGUF file or --demo");
    o.model_path = args.positionals().front();
  }
  o.n_ctx = args.intOr("--ctx", 2048);
  if (o.n_ctx < 16) throw UsageError("--ctx must be at least 16");
  o.threads = args.intOr("--threads", 0);
  o.device = deviceChoice(args);
  const std::string kv = args.valueOr("--kv", "f32");
  if (kv != "f32" && kv != "f16") throw UsageError("--kv must be f32 or f16");
  o.kv_f16 = kv == "f16";
  return o;
}

DeviceChoice deviceChoice(const Args& args) {
  try {
    return parseDeviceChoice(args.valueOr("--backend", "cpu"));
  } catch (const std::invalid_argument&) {
    throw UsageError("--backend must be cpu, cuda or auto");
  }
}

SamplerParams samplerParams(const Args& args) {
  SamplerParams p;
  p.temperature = static_cast<float>(args.doubleOr("--temp", p.temperature));
  p.top_k = args.intOr("--top-k", p.top_k);
  p.top_p = static_cast<float>(args.doubleOr("--top-p", p.top_p));
  p.min_p = static_cast<float>(args.doubleOr("--min-p", p.min_p));
  p.repeat_penalty = static_cast<float>(args.doubleOr("--repeat-penalty", p.repeat_penalty));
  p.repeat_last_n = args.intOr("--repeat-last-n", p.repeat_last_n);
  p.seed = args.uint64Or("--seed", 42);
  if (p.repeat_penalty <= 0) throw UsageError("--repeat-penalty must be > 0");
  return p;
}

void announceModel(const Model& model) {
  const auto& c = model.config();
  std::fprintf(stderr, "model: %s (%s, %d layers, %d experts, %d used per token)\n",
               c.model_name.empty() ? "(unnamed)" : c.model_name.c_str(), c.arch_name.c_str(), c.n_layer,
               c.n_expert, c.n_expert_used);
  if (model.isSynthetic()) std::fprintf(stderr, "%s\n", kDemoNotice);
}

}  // namespace moe::cli
