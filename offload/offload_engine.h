// One offloading policy, assembled (offload/policy.h names its parts): host
// expert store, slot slab, copy engine (with the optional simulated link), copy
// queue (TransferWorker: the slot table, with its staging slots), predictor and
// CachedExpertSource, or, for `resident`, the experts in place. Runtime
// (runtime/runtime.h) builds one per run.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inference/backend.h"
#include "inference/model.h"
#include "inference/transformer.h"
#include "offload/cached_expert_source.h"
#include "offload/copy_link.h"
#include "offload/offload_device.h"
#include "offload/offload_metrics.h"
#include "offload/policy.h"

namespace moe {

struct LinkOptions {
  double bytes_per_second = 0;  // > 0: simulated link of this bandwidth; 0: plain copies (bandwidth measured)
  bool paced = false;           // the simulated link also takes that long in wall time
};

struct OffloadConfig {
  OffloadPolicy policy = OffloadPolicy::kResident;
  // All slots, staging included: 2 to the routed experts unless resident. The app and
  // the CLI take them from a resolved LoadPlan (app/core/load_plan.h).
  int cache_slots = 0;
  LinkOptions link;
  ProactiveSwitches switches;  // proactive only
  // Which cached expert a copy replaces (slot_table.h); none: the policy's (policy.h).
  std::optional<Eviction> eviction;
  // With a device: decode steps read missed experts in place from the pinned store
  // and learn the routing after the step (CachedExpertSource::setMappedDecode), so
  // no MoE layer waits for the host. Ignored on the CPU path.
  bool mapped_decode = false;
  int stride = 0;          // 0: 2, or 1 for models of fewer than 3 MoE layers
  double admission = 0;    // proactive: PrefetchOptions::admission (0: every guess admitted)
  CpuExpertCost cpu_cost;  // seconds_1 == 0: measured at start on the CPU backend
  std::function<void(const CpuDecision&)> on_cpu_decision;  // optional log of each decision
  TransferMode mode = TransferMode::kThreaded;
  // Optional: a store built before (bench runs every policy on one); else built here.
  std::shared_ptr<const HostExpertStore> store;
  // Optional, proactive with prefetch only: the predictor to use instead of skip-gate
  // (e.g. a LearnedPredictor, docs/predictor.md); set `stride` to its distance.
  std::shared_ptr<ExpertPredictor> predictor;
  // Optional: the GPU the model computes on (makeOffloadDevice). Then the store is
  // pinned, the cache is device memory, copies run on the device's copy stream
  // (the simulated link is ignored), and CPU-computed experts (cpu-experts, CPU
  // fallback) need the engine's `cpu` backend to be a CPU backend, set on the
  // Transformer with setHostBackend (docs/CUDA.md); else CPU fallback is off and
  // cpu-experts is refused.
  std::shared_ptr<OffloadDevice> device;
};

class OffloadEngine {
 public:
  static constexpr int kStagingSlots = 2;

  // cpu: for `resident`, the backend the model computes on: every expert is
  // prepared for it (repacked on the CPU, uploaded to a GPU) and released by it when
  // the engine ends. For the other policies the CPU backend (the model's own on the
  // CPU path; with a device, the one the Transformer computes on_host experts with),
  // for the cpu-experts cost measurement. The model must outlive the engine. Throws std::invalid_argument
  // for fewer than 2 slots or more than the routed experts, HostMemoryError when the store does not fit in
  // RAM.
  OffloadEngine(const Model& model, Backend& cpu, OffloadConfig config);
  ~OffloadEngine();
  OffloadEngine(const OffloadEngine&) = delete;
  OffloadEngine& operator=(const OffloadEngine&) = delete;

  ExpertSource& source() { return *source_; }
  // Safe to call from any thread at any time; all zeros for `resident`.
  OffloadSnapshot snapshot() const;
  OffloadMetrics& metrics() { return metrics_; }
  const OffloadConfig& config() const { return config_; }
  // Null for `resident`.
  const HostExpertStore* store() const { return store_.get(); }
  // Null for `resident`: the copy queue, which owns the slot table.
  const TransferWorker* worker() const { return worker_.get(); }
  CachedExpertSource* cachedSource() { return cached_.get(); }
  std::string predictorName() const;  // "skip-gate", "none" or the given predictor's name
  void waitIdle();                    // no copy queued or running
  // A cancelled reply's flag: while it is set, the CPU path's paced copies stop
  // waiting for the simulated link (HostCopyLink::setInterrupt). Null: none.
  void setInterrupt(const std::atomic<bool>* flag);

  static int routedExperts(const Model& model);

 private:
  OffloadConfig config_;  // holds the device: destroyed after everything that uses it
  OffloadMetrics metrics_;
  std::shared_ptr<const HostExpertStore> store_;
  std::unique_ptr<SlotSlab> slab_;
  std::unique_ptr<HostCopyLink> host_link_;  // the CPU path's copies
  CopyLink* link_ = nullptr;                 // host_link_ or the device's copy engine
  std::unique_ptr<TransferWorker> worker_;
  std::shared_ptr<ExpertPredictor> predictor_;
  std::unique_ptr<CachedExpertSource> cached_;
  // Resident: every expert prepared by the backend that computes it (repacked on the
  // CPU, uploaded to a GPU), released by it at the end.
  struct PreparedExperts {
    Backend* backend = nullptr;
    std::vector<std::vector<ExpertWeights>> table;  // [n_layer][n_expert]
    PreparedExperts() = default;
    PreparedExperts(const PreparedExperts&) = delete;
    PreparedExperts& operator=(const PreparedExperts&) = delete;
    ~PreparedExperts();
  };
  PreparedExperts prepared_;
  std::unique_ptr<ExpertSource> resident_;
  ExpertSource* source_ = nullptr;
};

}  // namespace moe
