#include "offload/slot_table.h"

#include <algorithm>
#include <stdexcept>

namespace moe {

namespace {
bool evictable(const SlotInfo& s, int computing_layer) {
  return s.state == SlotState::kReady && !s.pinned && !s.held && !s.staging && s.layer != computing_layer;
}
}  // namespace

int pickVictim(std::span<const SlotInfo> slots, int layer, int computing_layer, int layer_share) {
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i].state == SlotState::kEmpty && !slots[i].staging) return static_cast<int>(i);
  int own = 0;
  for (const SlotInfo& s : slots)
    if (s.layer == layer && !s.staging) ++own;
  int own_lru = -1, global_lru = -1;
  for (size_t i = 0; i < slots.size(); ++i) {
    const SlotInfo& s = slots[i];
    if (!evictable(s, computing_layer)) continue;
    if (global_lru < 0 || s.last_use < slots[size_t(global_lru)].last_use) global_lru = static_cast<int>(i);
    if (s.layer == layer && (own_lru < 0 || s.last_use < slots[size_t(own_lru)].last_use))
      own_lru = static_cast<int>(i);
  }
  return (own >= layer_share && own_lru >= 0) ? own_lru : global_lru;
}

SlotTable::SlotTable(int n_slots, int n_layers, int chunks_per_expert)
    : n_layers_(std::max(1, n_layers)), chunks_(chunks_per_expert), slots_(static_cast<size_t>(n_slots)) {
  if (n_slots <= 0 || chunks_per_expert <= 0)
    throw std::invalid_argument("SlotTable: need slots > 0, chunks > 0");
}

int SlotTable::layerShare() const { return std::max(1, (slotCount() - staging_) / n_layers_); }

int SlotTable::find(int layer, int expert) const {
  auto it = index_.find(key(layer, expert));
  return it == index_.end() ? -1 : it->second;
}

int SlotTable::reserve(int layer, int expert, bool predicted) {
  if (const int slot = find(layer, expert); slot >= 0) {
    touch(slot);
    return slot;
  }
  const int victim = pickVictim(slots_, layer, computing_layer_, layerShare());
  if (victim < 0) return -1;
  SlotInfo& s = slots_[size_t(victim)];
  if (s.state != SlotState::kEmpty) {
    index_.erase(key(s.layer, s.expert));
    ++evictions_;
  }
  SlotInfo fresh;  // never a staging slot: pickVictim skips those
  fresh.pending = s.pending;
  fresh.free_when_done = s.free_when_done;
  s = fresh;
  s.state = SlotState::kLoading;
  s.layer = layer;
  s.expert = expert;
  s.predicted = predicted;
  index_[key(layer, expert)] = victim;
  touch(victim);
  return victim;
}

SlotState SlotTable::markChunkDone(int slot) {
  SlotInfo& s = at(slot);
  if (s.state != SlotState::kLoading) throw std::logic_error("ExpertCache: chunk done on a slot not LOADING");
  if (++s.chunks_done >= chunks_) s.state = SlotState::kReady;
  return s.state;
}

void SlotTable::markReady(int slot) {
  SlotInfo& s = at(slot);
  if (s.state != SlotState::kLoading) throw std::logic_error("ExpertCache: ready on a slot not LOADING");
  s.chunks_done = chunks_;
  s.state = SlotState::kReady;
}

void SlotTable::free(int slot) {
  SlotInfo& s = at(slot);
  if (s.state != SlotState::kEmpty) index_.erase(key(s.layer, s.expert));
  SlotInfo empty;  // the copy queue's bookkeeping stays: copies into it may still be in flight
  empty.staging = s.staging;
  empty.pending = s.pending;
  empty.free_when_done = s.free_when_done;
  s = empty;
}

void SlotTable::unpinAll() {
  for (SlotInfo& s : slots_) s.pinned = false;
}

void SlotTable::setStagingCount(int n) {
  if (n < 0 || n > slotCount()) throw std::invalid_argument("ExpertCache: staging count outside 0..slots");
  for (int i = 0; i < slotCount(); ++i) {
    const bool staging = i >= slotCount() - n;
    if (staging != slots_[size_t(i)].staging && slots_[size_t(i)].state != SlotState::kEmpty)
      throw std::logic_error("ExpertCache: staging slots can only change while EMPTY");
    slots_[size_t(i)].staging = staging;
  }
  staging_ = n;
}

int SlotTable::stagingSlot(int i) const {
  if (i < 0 || i >= staging_) throw std::out_of_range("ExpertCache: no such staging slot");
  return slotCount() - staging_ + i;
}

void SlotTable::loadStaging(int slot, int layer, int expert) {
  SlotInfo& s = at(slot);
  if (!s.staging || s.state != SlotState::kEmpty)
    throw std::logic_error("ExpertCache: loadStaging needs an EMPTY staging slot");
  if (index_.count(key(layer, expert))) throw std::logic_error("ExpertCache: expert already cached");
  s.state = SlotState::kLoading;
  s.layer = layer;
  s.expert = expert;
  s.chunks_done = 0;
  index_[key(layer, expert)] = slot;
  touch(slot);
}

void SlotTable::hold(int slot) {
  SlotInfo& s = at(slot);
  if (s.staging || s.state == SlotState::kEmpty)
    throw std::logic_error("ExpertCache: hold needs a cache slot in use");
  s.held = true;
}

void SlotTable::releaseHolds() {
  for (SlotInfo& s : slots_) s.held = false;
}

int SlotTable::heldCount() const {
  return static_cast<int>(
      std::count_if(slots_.begin(), slots_.end(), [](const SlotInfo& s) { return s.held; }));
}

int SlotTable::countState(SlotState state) const {
  return static_cast<int>(
      std::count_if(slots_.begin(), slots_.end(), [&](const SlotInfo& s) { return s.state == state; }));
}

int SlotTable::residentCount(int layer) const {
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [&](const SlotInfo& s) {
    return s.state != SlotState::kEmpty && !s.staging && s.layer == layer;
  }));
}

}  // namespace moe
