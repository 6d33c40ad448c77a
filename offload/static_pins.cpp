#include "offload/static_pins.h"

#include <algorithm>
#include <numeric>

namespace moe {

StaticPins::StaticPins(int n_layer, int n_expert, TransferWorker& worker, OffloadMetrics& metrics)
    : n_expert_(n_expert), worker_(worker), metrics_(metrics), uses_(size_t(n_layer) * size_t(n_expert), 0) {}

void StaticPins::countRouting(int layer, std::span<const int> experts_per_token) {
  if (pinned_) return;
  if (!routing_counted_) std::fill(uses_.begin(), uses_.end(), 0);  // per-token counts from now on
  routing_counted_ = true;
  for (int e : experts_per_token) ++uses_[size_t(layer) * n_expert_ + e];
}

void StaticPins::countGate(int layer, std::span<const int> experts) {
  if (routing_counted_) return;
  for (int e : experts) ++uses_[size_t(layer) * n_expert_ + e];
}

void StaticPins::onLayerInput(int n_tokens) {
  if (!pinned_ && n_tokens == 1 && std::any_of(uses_.begin(), uses_.end(), [](uint64_t u) { return u > 0; }))
    pinMostUsed();
}

int StaticPins::pinMostUsed() {
  pinned_ = true;
  std::vector<size_t> ids(uses_.size());
  std::iota(ids.begin(), ids.end(), size_t(0));
  // Most used first; ties by (layer, expert) so the choice is deterministic.
  std::stable_sort(ids.begin(), ids.end(), [&](size_t a, size_t b) { return uses_[a] > uses_[b]; });
  const size_t capacity = size_t(std::max(0, worker_.slotCount() - worker_.stagingCount()));
  std::vector<size_t> chosen;
  for (size_t id : ids)
    if (uses_[id] > 0 && chosen.size() < capacity) chosen.push_back(id);
  worker_.releaseHolds();
  // Already resident first, so that reserving the others cannot evict them.
  const SlotTable table = worker_.snapshot();
  int held = 0;
  std::vector<size_t> missing;
  for (size_t id : chosen) {
    const int layer = int(id / n_expert_), expert = int(id % n_expert_);
    const int slot = table.find(layer, expert);
    if (slot >= 0 && !table.at(slot).staging && worker_.hold(layer, expert))
      ++held;
    else
      missing.push_back(id);
  }
  for (size_t id : missing) held += worker_.hold(int(id / n_expert_), int(id % n_expert_));
  worker_.waitIdle();
  metrics_.held_slots.store(uint64_t(held), std::memory_order_relaxed);
  return held;
}

}  // namespace moe
