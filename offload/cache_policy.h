// The caching policies of the offload path, one small class each, holding only the
// decisions in which they differ; CachedExpertSource, the copy queue and the slot
// table are the mechanics they share (offload/policy.h has the table of what each
// policy is made of).
//
//   policy        at a layer's input           on a miss                         routing statistics
//   reactive-lru  -                            copy                              -
//   static        pins the prompt's most-used  copy up to the layer's share of   counts the prompt's
//                 experts at the first decode  the cache, then stream through
//                 step                         the staging slots
//   proactive     predicts layer L+stride and  the CPU when it is sooner, else   -
//                 prefetches its experts       as static
//   cpu-experts   -                            the CPU when it is sooner, else   -
//                                              copy
// (`resident` needs none of this: every expert stays where the model maps it.)
#pragma once

#include <climits>
#include <functional>
#include <memory>
#include <span>

#include "inference/expert_source.h"
#include "offload/cpu_rule.h"
#include "offload/host_expert_store.h"
#include "offload/offload_metrics.h"
#include "offload/prefetcher.h"
#include "offload/static_pins.h"
#include "offload/transfer_worker.h"

namespace moe {

// What a policy decides with: all references must outlive the policy.
struct PolicyContext {
  const HostExpertStore& store;
  TransferWorker& worker;
  OffloadMetrics& metrics;
  int n_expert_used;
};

// One gate's misses as they are decided (each policy's onMiss updates it).
struct GateMisses {
  int tokens_per_expert = 1;  // tokens each chosen expert serves (estimated: batch x top-k / experts chosen)
  int allowance = INT_MAX;    // misses that may still take a cache slot; the rest stream
  int copies = 0;             // misses copied into cache slots so far
  int on_cpu = 0;             // misses sent to the CPU so far
};

class CachePolicy {
 public:
  virtual ~CachePolicy() = default;

  // At a layer's input (before its gate): what to prefetch, when to pin.
  virtual bool readsLayerInput() const { return false; }  // whether onLayerInput reads `hidden`
  virtual void onLayerInput(int /*layer*/, std::span<const float> /*hidden*/, int /*n_tokens*/) {}
  // Whether a layer whose gate chose more experts than its share of the cache
  // streams the rest through the staging slots.
  virtual bool streamsPastShare() const { return false; }
  // The gate chose `experts`; `push` queues them on the copy queue and returns the
  // execution order (a policy may wrap it: proactive scores its prediction).
  virtual ExecutionOrder gate(int /*layer*/, std::span<const int> /*experts*/,
                              const std::function<ExecutionOrder()>& push) {
    return push();
  }
  // An expert of the gate is not in the cache: copy it, compute it on the CPU, or stream it.
  virtual MissAction onMiss(const MissContext& /*m*/, GateMisses& g) { return copyWithinShare(g); }
  // The gate's per-token choice (the Transformer's routing event).
  virtual void onRouting(const RoutingEvent& /*ev*/) {}

  // Blocks until no prediction is waiting or running (proactive's prediction thread).
  virtual void waitPredictions() {}

 protected:
  static MissAction copyWithinShare(GateMisses& g);
};

class ReactiveLruPolicy final : public CachePolicy {};

class StaticPolicy final : public CachePolicy {
 public:
  explicit StaticPolicy(const PolicyContext& c);
  void onLayerInput(int layer, std::span<const float> hidden, int n_tokens) override;
  bool streamsPastShare() const override { return true; }
  ExecutionOrder gate(int layer, std::span<const int> experts,
                      const std::function<ExecutionOrder()>& push) override;
  void onRouting(const RoutingEvent& ev) override { pins_.countRouting(ev.layer, ev.experts); }
  bool pinned() const { return pins_.pinned(); }  // the most-used experts are held

 private:
  StaticPins pins_;
};

class CpuExpertsPolicy final : public CachePolicy {
 public:
  CpuExpertsPolicy(const PolicyContext& c, CpuFallbackOptions cpu);
  MissAction onMiss(const MissContext& m, GateMisses& g) override;

 private:
  CpuRule rule_;
};

// Proactive's parts, each a switch (the bench's ablation turns one off at a time).
struct ProactiveParts {
  PrefetchOptions prefetch;     // predictor null: no prefetching
  bool stream_prefill = false;  // needs staging slots in the cache
  CpuFallbackOptions cpu;       // cpu.enabled: a miss may be computed on the CPU
};

class ProactivePolicy final : public CachePolicy {
 public:
  ProactivePolicy(const PolicyContext& c, ProactiveParts parts);
  bool readsLayerInput() const override { return prefetcher_ != nullptr; }
  void onLayerInput(int layer, std::span<const float> hidden, int n_tokens) override;
  bool streamsPastShare() const override { return stream_prefill_; }
  ExecutionOrder gate(int layer, std::span<const int> experts,
                      const std::function<ExecutionOrder()>& push) override;
  MissAction onMiss(const MissContext& m, GateMisses& g) override;
  void onRouting(const RoutingEvent& ev) override {
    if (prefetcher_) prefetcher_->observe(ev);
  }
  void waitPredictions() override;

 private:
  bool stream_prefill_;
  std::unique_ptr<CpuRule> cpu_rule_;
  std::unique_ptr<Prefetcher> prefetcher_;  // last: its thread stops first
};

}  // namespace moe
