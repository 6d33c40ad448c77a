#include "app/core/fit_words.h"

#include <cstdio>

#include "offload/host_expert_store.h"

namespace moe {
namespace {

std::string printf1(const char* fmt, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, x);
  return buf;
}

std::string percent(double share, const char* fmt) { return printf1(fmt, 100.0 * share) + "%"; }

constexpr const char* kSimulation = "a simulation in host memory, not VRAM";

// "the 10.20 GB budget" / "the auto budget of 10.20 GB (12.27 GB free less a 1.07 GB margin)".
std::string budgetWords(const LoadPlan& p) {
  if (p.setting.isAuto() && p.on_gpu)
    return "the auto budget of " + formatBytes(p.budget_bytes) + " (" + formatBytes(p.free_bytes) +
           " free less a " + formatBytes(p.margin_bytes) + " safety margin)";
  return "the " + formatBytes(p.budget_bytes) + " budget";
}

}  // namespace

std::string formatBytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return printf1("%.2f GB", b / 1e9);
  if (b >= 1e6) return printf1("%.1f MB", b / 1e6);
  if (b >= 1e3) return printf1("%.1f KB", b / 1e3);
  return std::to_string(bytes) + " B";
}

std::string budgetShortfall(const LoadPlan& p) {
  const uint64_t fixed = p.fit.fixedBytes();
  if (fixed >= p.budget_bytes)
    return "Does not fit: the weights that stay on the GPU, the KV cache and the workspace need " +
           formatBytes(fixed) + ", more than " + budgetWords(p) + ".";
  return "Does not fit: after the " + formatBytes(fixed) + " that stay on the GPU, " + budgetWords(p) +
         " leaves " + formatBytes(p.budget_bytes - fixed) + ", less than the 2 expert slots (" +
         formatBytes(2 * p.fit.expert_bytes) + ") needed to stream experts.";
}

std::string planShort(const LoadPlan& p) {
  if (!p.loads()) {
    const uint64_t fixed = p.fit.fixedBytes();
    const bool vram = p.setting.isAuto() || p.setting.kind == BudgetSetting::Kind::kVramBytes;
    if (!vram || (p.setting.kind == BudgetSetting::Kind::kVramBytes && p.setting.bytes == 0))
      return "no: " + p.error;
    if (fixed >= p.budget_bytes) return "no: needs " + formatBytes(fixed) + " before any expert";
    return "no: room for fewer than 2 experts";
  }
  if (p.onCpuOnly()) return "runs on the CPU (no GPU)";
  if (p.simulated) {
    if (p.all_experts_fit || p.cache_slots == 0) return "simulated: every expert fits (no GPU)";
    return "simulated: " + percent(p.cacheShare(), "%.0f") + " of experts cached (no GPU)";
  }
  if (p.cache_slots == 0) return "yes, every expert on the GPU";
  return "yes, " + percent(p.cacheShare(), "%.0f") + " of experts cached";
}

std::string planSummary(const LoadPlan& p, uint64_t host_available) {
  std::string s;
  if (p.onCpuOnly())
    return "No GPU in use: the model runs on the CPU, every expert computed from host RAM (" +
           formatBytes(p.fit.host_pinned_bytes) + " of experts).";
  if (p.simulated)
    s = "No GPU in use: the model runs on the CPU. The expert cache below is " + std::string(kSimulation) +
        (p.setting.isAuto() ? "." : ", planned for a card with " + formatBytes(p.budget_bytes) + ".") + "\n";
  else if (p.setting.isAuto())
    s = "Budget: " + budgetWords(p).substr(4) + ".\n";
  else if (p.setting.kind == BudgetSetting::Kind::kVramBytes)
    s = "Budget: " + formatBytes(p.budget_bytes) + " of VRAM.\n";
  s += std::string(p.simulated ? "In the simulated VRAM" : "On the GPU") + ": weights " +
       formatBytes(p.fit.resident_bytes) + " + KV cache " + formatBytes(p.fit.kv_bytes) + " (" +
       std::to_string(p.n_ctx) + " tokens)";
  if (p.fit.recurrent_state_bytes) s += " + recurrent state " + formatBytes(p.fit.recurrent_state_bytes);
  s += " + workspace " + formatBytes(p.fit.workspace_bytes) + ".\n";
  if (!p.loads())
    s += p.error + "\n";
  else if (p.cache_slots == 0)
    s += "Expert cache: all " + std::to_string(p.fit.total_experts) + " experts fit; no offloading needed.\n";
  else
    s += "Expert cache: " + std::to_string(p.cache_slots) + " of " + std::to_string(p.fit.total_experts) +
         " experts (" + percent(p.cacheShare(), "%.1f") + ")" +
         (p.capped_for_demo ? ", the demo model's share under auto" : "") + "; " + formatBytes(p.left_bytes) +
         " left.\n";
  s += "Pinned host RAM for the experts: " + formatBytes(p.fit.host_pinned_bytes);
  if (host_available == 0)
    s += " (free RAM unknown).";
  else if (p.fit.host_pinned_bytes <= host_available)
    s += " of " + formatBytes(host_available) + " free: fits.";
  else
    s += " but only " + formatBytes(host_available) + " is free: does NOT fit.";
  return s;
}

std::string planNote(const LoadPlan& p) {
  if (!p.loads()) return p.error;
  if (p.onCpuOnly()) return "resident: no GPU in use, every expert is computed on the CPU from host RAM";
  const char* where =
      p.simulated ? "simulated: host memory standing in for VRAM" : "in VRAM, copied from pinned RAM";
  if (p.cache_slots == 0) {
    if (p.all_experts_fit)
      return "resident: every expert fits the budget (" +
             (p.setting.isAuto() ? "auto, " + formatBytes(p.budget_bytes) + " of free VRAM"
                                 : formatBytes(p.budget_bytes)) +
             (p.simulated ? ", simulated: no GPU)" : ")");
    return p.simulated ? "resident: every expert in host memory" : "resident: every expert on the GPU";
  }
  return std::string(policyName(p.policy)) + ": cache of " + std::to_string(p.cache_slots) + " of " +
         std::to_string(p.fit.total_experts) + " experts (" + where + ")";
}

std::string fitHeading(const BudgetSetting& budget, const DeviceMemory& device) {
  switch (budget.kind) {
    case BudgetSetting::Kind::kAuto:
      if (!device.gpu) return "Fits? (no GPU: runs on the CPU)";
      return "Fits the GPU (auto: " +
             formatBytes(device.free_bytes > kAutoVramMarginBytes ? device.free_bytes - kAutoVramMarginBytes
                                                                  : 0) +
             ")?";
    case BudgetSetting::Kind::kVramBytes:
      return "Fits " + formatBytes(budget.bytes) + (device.gpu ? "?" : "? (simulated, no GPU)");
    case BudgetSetting::Kind::kCacheBytes: return "Cache of " + formatBytes(budget.bytes) + "?";
    case BudgetSetting::Kind::kCacheShare: return "Cache of " + percent(budget.share, "%.0f") + "?";
  }
  return "Fits?";
}

std::string budgetPhrase(const BudgetSetting& budget, const DeviceMemory& device) {
  switch (budget.kind) {
    case BudgetSetting::Kind::kAuto:
      if (!device.gpu) return "this computer: no GPU, so models run on the CPU";
      return "the GPU's free memory (auto: " +
             formatBytes(device.free_bytes > kAutoVramMarginBytes ? device.free_bytes - kAutoVramMarginBytes
                                                                  : 0) +
             " after a " + formatBytes(kAutoVramMarginBytes) + " safety margin)";
    case BudgetSetting::Kind::kVramBytes:
      return "a VRAM budget of " + formatBytes(budget.bytes) + (device.gpu ? "" : ", simulated (no GPU)");
    case BudgetSetting::Kind::kCacheBytes: return "a cache of " + formatBytes(budget.bytes);
    case BudgetSetting::Kind::kCacheShare:
      return "a cache of " + percent(budget.share, "%.0f") + " of the experts";
  }
  return {};
}

uint64_t availableHostRam() { return HostExpertStore::availableRam(); }

}  // namespace moe
