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

}  // namespace

std::string formatBytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return printf1("%.2f GB", b / 1e9);
  if (b >= 1e6) return printf1("%.1f MB", b / 1e6);
  if (b >= 1e3) return printf1("%.1f KB", b / 1e3);
  return std::to_string(bytes) + " B";
}

std::string whyItDoesNotFit(const FitEstimate& fit) {
  if (fit.fits_gpu) return {};
  const uint64_t fixed = fixedGpuBytes(fit);
  if (fixed >= fit.vram_budget)
    return "Does not fit: the weights that stay on the GPU, the KV cache and the workspace need " +
           formatBytes(fixed) + ", more than the " + formatBytes(fit.vram_budget) + " budget.";
  return "Does not fit: after the " + formatBytes(fixed) + " that stay on the GPU, the " +
         formatBytes(fit.vram_budget) + " budget leaves " + formatBytes(fit.vram_budget - fixed) +
         ", less than the 2 expert slots (" + formatBytes(2 * fit.expert_bytes) +
         ") needed to stream experts.";
}

std::string fitShort(const FitEstimate& fit) {
  if (!fit.fits_gpu) {
    const uint64_t fixed = fixedGpuBytes(fit);
    if (fixed >= fit.vram_budget) return "no: needs " + formatBytes(fixed) + " before any expert";
    return "no: room for fewer than 2 experts";
  }
  if (fit.all_experts_fit) return "yes, every expert on the GPU";
  return "yes, " + printf1("%.0f", 100.0 * fit.cacheShare()) + "% of experts cached";
}

std::string fitSummary(const FitEstimate& fit, uint64_t host_available) {
  std::string s = "On the GPU: weights " + formatBytes(fit.resident_bytes) + " + KV cache " +
                  formatBytes(fit.kv_cache_bytes);
  if (fit.recurrent_state_bytes) s += " + recurrent state " + formatBytes(fit.recurrent_state_bytes);
  s += " + workspace " + formatBytes(fit.workspace_bytes) + ".\n";
  if (!fit.fits_gpu)
    s += whyItDoesNotFit(fit) + "\n";
  else if (fit.all_experts_fit)
    s += "Expert cache: all " + std::to_string(fit.total_experts) + " experts fit; no offloading needed.\n";
  else
    s += "Expert cache: " + std::to_string(fit.cache_slots) + " of " + std::to_string(fit.total_experts) +
         " experts (" + printf1("%.1f", 100.0 * fit.cacheShare()) + "%).\n";
  s += "Pinned host RAM for the experts: " + formatBytes(fit.host_pinned_bytes);
  if (host_available == 0)
    s += " (free RAM unknown).";
  else if (fit.host_pinned_bytes <= host_available)
    s += " of " + formatBytes(host_available) + " free: fits.";
  else
    s += " but only " + formatBytes(host_available) + " is free: does NOT fit.";
  return s;
}

uint64_t availableHostRam() { return HostExpertStore::availableRam(); }

}  // namespace moe
