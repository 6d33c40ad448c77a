#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "app/cli/bench_model.h"
#include "app/cli/commands.h"
#include "app/cli/model_options.h"
#include "app/core/load_plan.h"
#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/cuda_library.h"
#include "inference/model.h"
#include "offload/host_expert_store.h"

namespace moe::cli {
namespace {

std::string humanBytes(uint64_t b) {
  char buf[32];
  const double x = static_cast<double>(b);
  if (x >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GB", x / 1e9);
  else if (x >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2f MB", x / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.1f KB", x / 1e3);
  return buf;
}

// Parameters (elements) of the model: everything in the file; without the layers
// the forward pass skips (next-token prediction); and active per token (the routed
// experts only n_expert_used of n_expert; the input embedding, a lookup, not at all),
// as model cards count them.
struct ParameterCounts {
  double in_file = 0, run = 0, active = 0;
};

std::string countText(double n) {
  char buf[32];
  if (n >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", n / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.0fK", n / 1e3);
  return buf;
}

// Stacked experts (ffn_gate_exps) or old Mixtral files' one tensor per expert
// (ffn_gate.3.weight).
bool isRoutedExpertTensor(const std::string& name) {
  if (name.find("_exps.") != std::string::npos) return true;
  for (const char* part : {".ffn_gate.", ".ffn_up.", ".ffn_down."}) {
    const size_t at = name.find(part);
    if (at != std::string::npos && std::isdigit(static_cast<unsigned char>(name[at + std::strlen(part)])))
      return true;
  }
  return false;
}

ParameterCounts countParameters(const Model& m) {
  const auto& c = m.config();
  ParameterCounts p;
  for (const auto& t : m.file().tensors()) {
    const double n = static_cast<double>(t.nElements());
    p.in_file += n;
    int layer = -1;
    if (t.name.rfind("blk.", 0) == 0) layer = std::atoi(t.name.c_str() + 4);
    if (layer >= c.n_layer) continue;
    p.run += n;
    const bool routed = isRoutedExpertTensor(t.name);
    // The input embedding is a lookup of one row per token, not computed with;
    // tied to the output projection it is read whole.
    const bool lookup_only = t.name == "token_embd.weight" && !m.weights().output_tied;
    if (!lookup_only) p.active += routed ? n * c.n_expert_used / c.n_expert : n;
  }
  return p;
}

// The routed experts' types; a mix names each type's projections ("IQ2_XXS (gate, up),
// IQ3_S (down)").
std::string expertTypes(const Model& m) {
  std::map<std::string, std::set<std::string>> roles;
  for (const auto& layer : m.hostExperts())
    for (const auto& e : layer) {
      roles[gguf::tensorTypeName(e.gate.type)].insert("gate");
      roles[gguf::tensorTypeName(e.up.type)].insert("up");
      roles[gguf::tensorTypeName(e.down.type)].insert("down");
    }
  std::string out;
  for (const auto& [name, used] : roles) {
    out += (out.empty() ? "" : ", ") + name;
    if (roles.size() > 1) {
      std::string list;
      for (const char* role : {"gate", "up", "down"})
        if (used.count(role)) list += (list.empty() ? "" : ", ") + std::string(role);
      out += " (" + list + ")";
    }
  }
  return out;
}

// Which backend --backend would compute on, and why not CUDA where it would not.
std::string computeLine(DeviceChoice requested) {
  if (requested == DeviceChoice::kCpu) return "CPU (--backend cpu; auto or cuda would try the GPU)";
  std::string why;
  if (!cudaDeviceAvailable(&why)) return "CPU (CUDA not used: " + why + ")";
  uint64_t free_b = 0, total_b = 0;
  cudaMemoryInfo(&free_b, &total_b);
  return "CUDA, " + humanBytes(free_b) + " free of " + humanBytes(total_b) + " (" + cudaLibrary()->runtime +
         ", " + cudaLibraryPath() + ")";
}

// What loads under the proactive policy (the app's default) at the budget on the
// device of --backend: the plan every view of the app shows (app/core/load_plan.h).
void printPlan(const LoadPlan& plan, const DeviceMemory& device, int attention_layers, int recurrent_layers) {
  const FitEstimate& fit = plan.fit;
  if (plan.onCpuOnly())
    std::printf("\nNo usable GPU (%s): the model runs on the CPU, context %d:\n", device.why_cpu.c_str(),
                plan.n_ctx);
  else if (plan.simulated && plan.setting.isAuto())
    std::printf(
        "\nNo usable GPU (%s): the model runs on the CPU; under auto the demo model's cache is simulated "
        "(host memory, not VRAM), context %d:\n",
        device.why_cpu.c_str(), plan.n_ctx);
  else if (plan.simulated)
    std::printf(
        "\nVRAM budget %s, simulated (no usable GPU: %s; the cache is host memory, not VRAM), context %d:\n",
        humanBytes(plan.budget_bytes).c_str(), device.why_cpu.c_str(), plan.n_ctx);
  else if (plan.setting.isAuto())
    std::printf("\nVRAM budget auto: %s (%s free less the %s safety margin), context %d:\n",
                humanBytes(plan.budget_bytes).c_str(), humanBytes(plan.free_bytes).c_str(),
                humanBytes(plan.margin_bytes).c_str(), plan.n_ctx);
  else
    std::printf("\nVRAM budget %.1f GB, context %d:\n", double(plan.budget_bytes) / 1e9, plan.n_ctx);
  std::printf("  resident weights %s + KV cache %s", humanBytes(fit.resident_bytes).c_str(),
              humanBytes(fit.kv_bytes).c_str());
  if (fit.recurrent_state_bytes)
    std::printf(" (%d attention layers) + recurrent state %s (%d delta-net layers, live + %d snapshots)",
                attention_layers, humanBytes(fit.recurrent_state_bytes).c_str(), recurrent_layers,
                kRecurrentSnapshots);
  std::printf(" + workspace %s%s\n", humanBytes(fit.workspace_bytes).c_str(),
              plan.onCpuOnly() ? " (what a GPU would hold besides the experts)" : "");
  if (plan.onCpuOnly()) {
    std::printf("  every expert computed on the CPU from host RAM (%s of experts)\n",
                humanBytes(fit.host_pinned_bytes).c_str());
    return;
  }
  if (!plan.loads()) {
    std::printf("  does NOT fit: %s\n", plan.error.c_str());
    return;
  }
  if (plan.cache_slots == 0)
    std::printf("  expert cache: all %llu experts fit, no offloading needed; %s left\n",
                (unsigned long long)fit.total_experts, humanBytes(plan.left_bytes).c_str());
  else
    std::printf("  expert cache: %d of %llu experts (%.1f%%)%s; %s left\n", plan.cache_slots,
                (unsigned long long)fit.total_experts, 100.0 * plan.cacheShare(),
                plan.capped_for_demo ? ", the demo model's share under auto" : "",
                humanBytes(plan.left_bytes).c_str());
  const uint64_t ram = HostExpertStore::availableRam();
  std::printf("  pinned host RAM for the expert store: %s (this machine has %s available%s)\n",
              humanBytes(fit.host_pinned_bytes).c_str(), ram ? humanBytes(ram).c_str() : "an unknown amount",
              ram && fit.host_pinned_bytes + (1ull << 30) > ram ? ": NOT enough" : "");
}

}  // namespace

int runInfo(const std::vector<std::string>& argv) {
  auto value_opts = modelValueOptions();
  value_opts.insert("--vram");
  value_opts.insert("--preset");
  value_opts.insert("--quant");
  const Args args(argv, value_opts, modelFlags());
  // A full-size preset is described from its layout, never generated.
  std::unique_ptr<PresetLayoutFile> layout;
  if (auto preset = args.value("--preset")) {
    if (!args.positionals().empty() || args.flag("--demo") || args.flag("--demo-random"))
      throw UsageError("--preset and a model are exclusive");
    layout = std::make_unique<PresetLayoutFile>(*preset, args.valueOr("--quant", "q8_0"));
  } else if (args.value("--quant")) {
    throw UsageError("--quant goes with --preset");
  }
  std::vector<std::string> model_argv;  // the arguments with the layout file as the model
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--preset" || argv[i] == "--quant") {
      ++i;
      continue;
    }
    model_argv.push_back(argv[i]);
  }
  if (layout) model_argv.push_back(layout->path());
  SessionOptions so = sessionOptions(Args(model_argv, value_opts, modelFlags()));
  // The budget the plan is resolved with: auto (the default) or --vram GB.
  BudgetSetting budget = BudgetSetting::automatic();
  if (const auto v = args.value("--vram"); v && *v != "auto") {
    const double vram_gb = args.doubleOr("--vram", 0);
    if (!(vram_gb > 0 && vram_gb <= 1e6)) throw UsageError("--vram must be in (0, 1e6] (GB) or auto");
    budget = BudgetSetting::vramBytes(static_cast<uint64_t>(vram_gb * 1e9));
  }
  const DeviceMemory device = probeDevice(so.device);

  auto backend = makeCpuBackend(1);
  auto file = openModelFile(so);
  const uint64_t file_size = file.fileSize();
  auto model = Model::load(std::move(file), *backend, Model::Purpose::Describe);
  const auto& c = model->config();
  const auto& s = model->sizes();

  if (layout)
    std::printf("preset:          %s in %s (its layout only; the weights were not written): %s\n",
                args.valueOr("--preset", "").c_str(), args.valueOr("--quant", "q8_0").c_str(),
                humanBytes(file_size).c_str());
  else
    std::printf("file:            %s (%s)\n", so.demo ? "(embedded demo model)" : so.model_path.c_str(),
                humanBytes(file_size).c_str());
  if (model->isSynthetic()) std::printf("note:            %s\n", kDemoNotice);
  std::printf("name:            %s\n", c.model_name.c_str());
  std::printf("compute:         %s\n", computeLine(so.device).c_str());
  std::printf("architecture:    %s\n", c.arch_name.c_str());
  int recurrent_layers = 0;
  for (int il = 0; il < c.n_layer; ++il) recurrent_layers += c.isRecurrentLayer(il);
  std::printf("layers:          %d (%d MoE, %d dense)", c.n_layer, s.moe_layers, c.n_layer - s.moe_layers);
  if (c.n_nextn > 0) std::printf(" + %d next-token-prediction layer(s) in the file, not run", c.n_nextn);
  std::printf("\n");
  if (c.hasRecurrentLayers())
    std::printf(
        "attention:       %d full-attention layers, %d gated delta-net layers (%d key heads, %d value "
        "heads of %d, conv %d)\n",
        c.n_layer - recurrent_layers, recurrent_layers, c.delta.n_k_heads, c.delta.n_v_heads, c.delta.head_v,
        c.delta.conv_kernel);
  const char* rope = c.rope_style == RopeStyle::Norm ? "norm" : "neox";
  if (c.isMla()) {
    std::printf("hidden:          %d   heads %d, latent attention: query %d + rope %d per head", c.n_embd,
                c.n_head, c.mla.qk_nope, c.n_rot);
    if (c.mla.q_lora > 0) std::printf(" (through %d)", c.mla.q_lora);
    std::printf(", cached latent %d + rope %d, values %d per head, rope %s base %g\n", c.mla.kv_lora, c.n_rot,
                c.mla.v_dim, rope, c.rope_freq_base);
  } else if (c.isGemma4()) {
    // The first sliding and the first global layer describe their kinds.
    int sliding = -1, global = -1, n_sliding = 0, n_shared = 0;
    for (int il = 0; il < c.n_layer; ++il) {
      const bool slides = c.windowOf(il) > 0;
      n_sliding += slides;
      n_shared += !c.ownsKv(il);
      if (slides && sliding < 0) sliding = il;
      if (!slides && global < 0) global = il;
    }
    std::printf("hidden:          %d   heads %d; rope %s\n", c.n_embd, c.n_head, rope);
    if (sliding >= 0)
      std::printf("sliding layers:  %d, window %d, kv %d, head dim %d, rope %d dims base %g\n", n_sliding,
                  c.sliding_window, c.nHeadKvOf(sliding), c.headDimOf(sliding), c.nRotOf(sliding),
                  c.ropeBaseOf(sliding));
    if (global >= 0)
      std::printf("global layers:   %d, kv %d, head dim %d, rope %d dims base %g%s\n", c.n_layer - n_sliding,
                  c.nHeadKvOf(global), c.headDimOf(global), c.nRotOf(global), c.ropeBaseOf(global),
                  model->weights().rope_freqs.empty() ? "" : " (with rope_freqs)");
    std::printf(
        "gemma4:          %d shared-KV layers, dense MLP ffn %d beside the experts, logit soft-cap %g\n",
        n_shared, c.n_ff, c.final_logit_softcap);
  } else {
    std::printf("hidden:          %d   heads %d / kv %d, head dim %d, rope %s base %g\n", c.n_embd, c.n_head,
                c.n_head_kv, c.head_dim, rope, c.rope_freq_base);
  }
  if (c.yarn.active())
    std::printf("rope scaling:    YaRN x%g over %d positions\n", c.yarn.factor, c.yarn.orig_ctx);
  std::printf("experts:         %d per layer, %d used per token, ffn %d", c.n_expert, c.n_expert_used,
              c.n_ff_exp);
  if (c.groupLimited()) std::printf(", from %d of %d groups", c.n_group_used, c.n_expert_groups);
  std::printf("\n");
  if (c.n_ff_shexp)
    std::printf("shared experts:  ffn %d%s\n", c.n_ff_shexp, c.shared_expert_gated ? " (sigmoid-gated)" : "");
  std::printf("vocabulary:      %d tokens; context %d; chat template %s\n", c.n_vocab, c.n_ctx_train,
              chatFamilyName(model->chatFamily()));
  const ParameterCounts params = countParameters(*model);
  std::printf("parameters:      %s in the file, %s in the layers run, %s active per token\n",
              countText(params.in_file).c_str(), countText(params.run).c_str(),
              countText(params.active).c_str());
  std::printf("expert types:    %s\n", expertTypes(*model).c_str());
  std::printf("one expert:      %s\n", humanBytes(s.expert_bytes).c_str());
  std::printf("routed experts:  %s (%d layers x %d)\n", humanBytes(s.routed_expert_bytes).c_str(),
              s.moe_layers, c.n_expert);
  std::printf("other weights:   %s (always resident)\n", humanBytes(s.other_bytes).c_str());
  std::printf("per token:       %s of expert weights read (%d x %d layers)\n",
              humanBytes(s.expert_bytes * c.n_expert_used * s.moe_layers).c_str(), c.n_expert_used,
              s.moe_layers);

  printPlan(resolveLoadPlan({budget, OffloadPolicy::kProactive, so.n_ctx, so.demo}, shapeOf(*model), device),
            device, c.n_layer - recurrent_layers, recurrent_layers);
  return 0;
}

}  // namespace moe::cli
