// The CPU rule (`cpu-experts`, and proactive's CPU fallback): a miss is computed
// from its host copy when the CPU is predicted to finish it sooner than the link
// could deliver it:
//   copy = (bytes queued ahead on the link + this expert) / link bandwidth
//   cpu  = (experts already sent to the CPU in this layer + 1) x cost(tokens)
#pragma once

#include <cstddef>
#include <functional>

#include "offload/cpu_expert_cost.h"
#include "offload/offload_metrics.h"

namespace moe {

// One CPU-versus-copy decision, as logged.
struct CpuDecision {
  int layer = -1, expert = -1;
  int tokens = 0;           // tokens the expert serves (estimated: batch x top-k / experts chosen)
  double cpu_seconds = 0;   // CPU finish: (experts already sent to the CPU this layer + 1) x cost(tokens)
  double copy_seconds = 0;  // link finish: (bytes queued ahead + this expert) / link bandwidth
  bool on_cpu = false;      // cpu_seconds < copy_seconds
};

struct CpuFallbackOptions {
  bool enabled = false;
  double link_bytes_per_second = 0;                     // bandwidth the copy estimate uses (> 0 when enabled)
  CpuExpertCost cost;                                   // measured CPU time of one expert
  std::function<void(const CpuDecision&)> on_decision;  // optional log (called on the compute thread)
};

class CpuRule {
 public:
  // Throws std::invalid_argument without a link bandwidth. metrics must outlive the rule.
  CpuRule(CpuFallbackOptions options, size_t expert_bytes, OffloadMetrics& metrics);
  // A miss of (layer, expert) serving `tokens` tokens, `queued_bytes` ahead of it on
  // the link, `on_cpu` experts of this gate already sent to the CPU: true when the
  // CPU wins. Counts the decision (cpu_decisions, cpu_computed) and logs it.
  bool computeOnCpu(int layer, int expert, int tokens, size_t queued_bytes, int on_cpu);

 private:
  CpuFallbackOptions options_;
  size_t expert_bytes_;
  OffloadMetrics& metrics_;
};

}  // namespace moe
