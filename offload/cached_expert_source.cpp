#include "offload/cached_expert_source.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <numeric>

namespace moe {

CachedExpertSource::CachedExpertSource(const HostExpertStore& store, TransferWorker& worker,
                                       OffloadMetrics& metrics, int n_expert_used,
                                       std::unique_ptr<CachePolicy> policy)
    : store_(store),
      worker_(worker),
      metrics_(metrics),
      n_expert_used_(n_expert_used),
      from_host_(store.experts(), 0),
      policy_(policy ? std::move(policy) : std::make_unique<ReactiveLruPolicy>()) {}

void CachedExpertSource::onLayerInput(int layer, std::span<const float> hidden, int n_tokens) {
  n_tokens_ = std::max(1, n_tokens);
  policy_->onLayerInput(layer, hidden, n_tokens);
}

std::vector<ExpertRef> CachedExpertSource::acquire(int layer, std::span<const int> experts) {
  // Prefill streaming: past its share, a layer's misses go through the staging slots.
  const int share = worker_.layerShare();
  const bool streaming =
      policy_->streamsPastShare() && worker_.stagingCount() > 0 && static_cast<int>(experts.size()) > share;
  const int allowance = streaming ? std::max(0, share - worker_.residentCount(layer)) : INT_MAX;
  GateMisses misses;
  misses.allowance = allowance;
  misses.tokens_per_expert = std::max(1, (n_tokens_ * n_expert_used_ + static_cast<int>(experts.size()) - 1) /
                                             static_cast<int>(experts.size()));
  const ExecutionOrder order = policy_->gate(layer, experts, [&] {
    return worker_.pushPrecise(layer, experts,
                               [&](const MissContext& m) { return policy_->onMiss(m, misses); });
  });

  std::vector<ExpertRef> refs;
  refs.reserve(order.size());
  for (const OrderedExpert& o : order) {
    const bool host = o.residency == Residency::kUnavailable || o.residency == Residency::kHost;
    from_host_.at(o.expert) = host;
    const uint8_t* base = host ? store_.expertData(layer, o.expert) : worker_.slab().slotData(o.slot);
    refs.push_back({o.expert, store_.viewAt(layer, base), o.residency == Residency::kHost,
                    host || o.residency == Residency::kReady});
    host_computed_ += host;
  }
  return refs;
}

void CachedExpertSource::waitFor(int layer, const ExpertRef& ref) {
  worker_.beginCompute(layer, ref.expert);
  if (from_host_.at(ref.expert)) return;
  const auto start = std::chrono::steady_clock::now();
  bool waited = false;
  if (copy_wait_) {
    const TransferWorker::IssueWait w = worker_.waitIssued(layer, ref.expert);
    waited = w.waited;
    if (!w.ready) {
      copy_wait_->computeWaitsFor(worker_.slab().slotData(w.slot), worker_.slab().slotBytes());
      metrics_.device_waits.fetch_add(1, std::memory_order_relaxed);
    }
  } else {
    waited = worker_.waitReady(layer, ref.expert);
  }
  if (waited) {
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
            .count();
    metrics_.blocked_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  }
}

void CachedExpertSource::release(int layer) { worker_.release(layer); }

std::span<const ExpertWeights> CachedExpertSource::mappedExperts(int layer) {
  if (!mapped_decode_) return {};
  const int n_expert = store_.experts();
  std::vector<int> slots = worker_.mapLayer(layer, n_expert);
  map_.resize(size_t(n_expert));
  for (int e = 0; e < n_expert; ++e) {
    const int slot = slots[size_t(e)];
    const uint8_t* base = slot >= 0 ? worker_.slab().slotData(slot) : store_.expertData(layer, e);
    map_[size_t(e)] = store_.viewAt(layer, base);
  }
  if (size_t(layer) >= mapped_slots_.size()) mapped_slots_.resize(size_t(layer) + 1);
  mapped_slots_[size_t(layer)] = std::move(slots);
  return map_;
}

// The layer's kernels are queued: the fence marks the stream there, so a copy that
// reuses one of its slots waits for them (release unpins).
void CachedExpertSource::mappedLayerQueued(int layer) { worker_.release(layer); }

void CachedExpertSource::routedOnDevice(const RoutingEvent& ev) {
  if (size_t(ev.layer) >= mapped_slots_.size()) return;
  std::vector<int> distinct;
  for (int e : ev.experts)
    if (std::find(distinct.begin(), distinct.end(), e) == distinct.end()) distinct.push_back(e);
  worker_.learnMappedGate(ev.layer, distinct, mapped_slots_[size_t(ev.layer)]);
}

}  // namespace moe
