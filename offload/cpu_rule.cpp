#include "offload/cpu_rule.h"

#include <stdexcept>

namespace moe {

CpuRule::CpuRule(CpuFallbackOptions options, size_t expert_bytes, OffloadMetrics& metrics)
    : options_(std::move(options)), expert_bytes_(expert_bytes), metrics_(metrics) {
  if (options_.link_bytes_per_second <= 0)
    throw std::invalid_argument("CPU fallback needs the link bandwidth");
}

bool CpuRule::computeOnCpu(int layer, int expert, int tokens, size_t queued_bytes, int on_cpu) {
  CpuDecision d;
  d.layer = layer;
  d.expert = expert;
  d.tokens = tokens;
  d.cpu_seconds = (on_cpu + 1) * options_.cost.estimate(tokens);
  d.copy_seconds = double(queued_bytes + expert_bytes_) / options_.link_bytes_per_second;
  d.on_cpu = d.cpu_seconds < d.copy_seconds;
  metrics_.cpu_decisions.fetch_add(1, std::memory_order_relaxed);
  if (options_.on_decision) options_.on_decision(d);
  if (d.on_cpu) metrics_.cpu_computed.fetch_add(1, std::memory_order_relaxed);
  return d.on_cpu;
}

}  // namespace moe
