#include "offload/cache_policy.h"

namespace moe {

MissAction CachePolicy::copyWithinShare(GateMisses& g) {
  if (g.copies >= g.allowance) return MissAction::kStream;
  ++g.copies;
  return MissAction::kCopy;
}

namespace {
// The CPU rule first: a miss goes to the CPU when it finishes sooner than the link.
bool sendToCpu(CpuRule& rule, const MissContext& m, GateMisses& g) {
  if (!rule.computeOnCpu(m.layer, m.expert, g.tokens_per_expert, m.queued_high_bytes, g.on_cpu)) return false;
  ++g.on_cpu;
  return true;
}
}  // namespace

StaticPolicy::StaticPolicy(const PolicyContext& c)
    : pins_(c.store.layers(), c.store.experts(), c.worker, c.metrics) {}

void StaticPolicy::onLayerInput(int, std::span<const float>, int n_tokens) { pins_.onLayerInput(n_tokens); }

ExecutionOrder StaticPolicy::gate(int layer, std::span<const int> experts,
                                  const std::function<ExecutionOrder()>& push) {
  pins_.countGate(layer, experts);
  return push();
}

CpuExpertsPolicy::CpuExpertsPolicy(const PolicyContext& c, CpuFallbackOptions cpu)
    : rule_(std::move(cpu), c.store.expertBytes(), c.metrics) {}

MissAction CpuExpertsPolicy::onMiss(const MissContext& m, GateMisses& g) {
  return sendToCpu(rule_, m, g) ? MissAction::kHost : copyWithinShare(g);
}

ProactivePolicy::ProactivePolicy(const PolicyContext& c, ProactiveParts parts)
    : stream_prefill_(parts.stream_prefill) {
  if (parts.cpu.enabled) cpu_rule_ = std::make_unique<CpuRule>(parts.cpu, c.store.expertBytes(), c.metrics);
  if (parts.prefetch.predictor)
    prefetcher_ = std::make_unique<Prefetcher>(parts.prefetch, c.store, c.worker, c.metrics, c.n_expert_used);
}

void ProactivePolicy::onLayerInput(int layer, std::span<const float> hidden, int n_tokens) {
  if (prefetcher_) prefetcher_->onLayerInput(layer, hidden, n_tokens);
}

ExecutionOrder ProactivePolicy::gate(int layer, std::span<const int> experts,
                                     const std::function<ExecutionOrder()>& push) {
  return prefetcher_ ? prefetcher_->gate(layer, experts, push) : push();
}

MissAction ProactivePolicy::onMiss(const MissContext& m, GateMisses& g) {
  return cpu_rule_ && sendToCpu(*cpu_rule_, m, g) ? MissAction::kHost : copyWithinShare(g);
}

void ProactivePolicy::waitPredictions() {
  if (prefetcher_) prefetcher_->waitIdle();
}

}  // namespace moe
