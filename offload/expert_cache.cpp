#include "offload/expert_cache.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <stdexcept>

namespace moe {

uint8_t* HostSlotMemory::allocate(size_t bytes) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  if (!p) throw std::bad_alloc();
  return static_cast<uint8_t*>(p);
}

void HostSlotMemory::deallocate(uint8_t* p, size_t) { std::free(p); }

ExpertCache::ExpertCache(int n_slots, size_t slot_bytes, int n_layers, int chunks_per_expert,
                         std::unique_ptr<SlotMemory> memory)
    : memory_(memory ? std::move(memory) : std::make_unique<HostSlotMemory>()),
      slot_bytes_((slot_bytes + 255) / 256 * 256),
      n_layers_(std::max(1, n_layers)),
      chunks_(chunks_per_expert) {
  if (n_slots <= 0 || slot_bytes == 0 || chunks_per_expert <= 0)
    throw std::invalid_argument("ExpertCache: need slots > 0, slot_bytes > 0, chunks > 0");
  slab_ = memory_->allocate(slot_bytes_ * static_cast<size_t>(n_slots));
  slots_.resize(static_cast<size_t>(n_slots));
}

ExpertCache::~ExpertCache() { memory_->deallocate(slab_, slot_bytes_ * slots_.size()); }

int ExpertCache::layerShare() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return layerShareLocked();
}

int ExpertCache::layerShareLocked() const { return std::max(1, (slotCount() - staging_) / n_layers_); }

int ExpertCache::find(int layer, int expert) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key(layer, expert));
  return it == index_.end() ? -1 : it->second;
}

SlotInfo ExpertCache::info(int slot) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_.at(static_cast<size_t>(slot));
}

bool ExpertCache::evictableLocked(const SlotInfo& s) const {
  return s.state == SlotState::kReady && !s.pinned && !s.held && !s.staging && s.layer != computing_layer_;
}

int ExpertCache::reserve(int layer, int expert, bool predicted) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = index_.find(key(layer, expert)); it != index_.end()) {
    touchLocked(it->second);
    return it->second;
  }
  int victim = -1;
  for (int i = 0; i < slotCount() && victim < 0; ++i)
    if (slots_[i].state == SlotState::kEmpty && !slots_[i].staging) victim = i;
  if (victim < 0) {
    int own = 0;
    for (const SlotInfo& s : slots_)
      if (s.layer == layer && !s.staging) ++own;
    int own_lru = -1, global_lru = -1;
    for (int i = 0; i < slotCount(); ++i) {
      const SlotInfo& s = slots_[i];
      if (!evictableLocked(s)) continue;
      if (global_lru < 0 || s.last_use < slots_[global_lru].last_use) global_lru = i;
      if (s.layer == layer && (own_lru < 0 || s.last_use < slots_[own_lru].last_use)) own_lru = i;
    }
    victim = (own >= layerShareLocked() && own_lru >= 0) ? own_lru : global_lru;
    if (victim < 0) return -1;
    index_.erase(key(slots_[victim].layer, slots_[victim].expert));
    ++evictions_;
  }
  SlotInfo& s = slots_[victim];
  s = SlotInfo{};  // never a staging slot: those are skipped above
  s.state = SlotState::kLoading;
  s.layer = layer;
  s.expert = expert;
  s.predicted = predicted;
  index_[key(layer, expert)] = victim;
  touchLocked(victim);
  return victim;
}

SlotState ExpertCache::markChunkDone(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  SlotInfo& s = slots_.at(static_cast<size_t>(slot));
  if (s.state != SlotState::kLoading) throw std::logic_error("ExpertCache: chunk done on a slot not LOADING");
  if (++s.chunks_done >= chunks_) s.state = SlotState::kReady;
  return s.state;
}

void ExpertCache::markReady(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  SlotInfo& s = slots_.at(static_cast<size_t>(slot));
  if (s.state != SlotState::kLoading) throw std::logic_error("ExpertCache: ready on a slot not LOADING");
  s.chunks_done = chunks_;
  s.state = SlotState::kReady;
}

void ExpertCache::free(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  SlotInfo& s = slots_.at(static_cast<size_t>(slot));
  if (s.state != SlotState::kEmpty) index_.erase(key(s.layer, s.expert));
  const bool staging = s.staging;
  s = SlotInfo{};
  s.staging = staging;
}

void ExpertCache::setStagingCount(int n) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (n < 0 || n > slotCount()) throw std::invalid_argument("ExpertCache: staging count outside 0..slots");
  for (int i = 0; i < slotCount(); ++i) {
    const bool staging = i >= slotCount() - n;
    if (staging != slots_[i].staging && slots_[i].state != SlotState::kEmpty)
      throw std::logic_error("ExpertCache: staging slots can only change while EMPTY");
    slots_[i].staging = staging;
  }
  staging_ = n;
}

int ExpertCache::stagingCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return staging_;
}

int ExpertCache::stagingSlot(int i) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (i < 0 || i >= staging_) throw std::out_of_range("ExpertCache: no such staging slot");
  return slotCount() - staging_ + i;
}

void ExpertCache::loadStaging(int slot, int layer, int expert) {
  std::lock_guard<std::mutex> lock(mutex_);
  SlotInfo& s = slots_.at(static_cast<size_t>(slot));
  if (!s.staging || s.state != SlotState::kEmpty)
    throw std::logic_error("ExpertCache: loadStaging needs an EMPTY staging slot");
  if (index_.count(key(layer, expert))) throw std::logic_error("ExpertCache: expert already cached");
  s.state = SlotState::kLoading;
  s.layer = layer;
  s.expert = expert;
  s.chunks_done = 0;
  index_[key(layer, expert)] = slot;
  touchLocked(slot);
}

void ExpertCache::hold(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  SlotInfo& s = slots_.at(static_cast<size_t>(slot));
  if (s.staging || s.state == SlotState::kEmpty)
    throw std::logic_error("ExpertCache: hold needs a cache slot in use");
  s.held = true;
}

void ExpertCache::releaseHolds() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (SlotInfo& s : slots_) s.held = false;
}

int ExpertCache::heldCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(
      std::count_if(slots_.begin(), slots_.end(), [](const SlotInfo& s) { return s.held; }));
}

void ExpertCache::touch(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  touchLocked(slot);
}

void ExpertCache::setComputingLayer(int layer) {
  std::lock_guard<std::mutex> lock(mutex_);
  computing_layer_ = layer;
}

int ExpertCache::computingLayer() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return computing_layer_;
}

void ExpertCache::pin(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_.at(static_cast<size_t>(slot)).pinned = true;
}

void ExpertCache::unpinAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (SlotInfo& s : slots_) s.pinned = false;
}

int ExpertCache::countState(SlotState state) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(
      std::count_if(slots_.begin(), slots_.end(), [&](const SlotInfo& s) { return s.state == state; }));
}

int ExpertCache::residentCount(int layer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(), [&](const SlotInfo& s) {
    return s.state != SlotState::kEmpty && !s.staging && s.layer == layer;
  }));
}

uint64_t ExpertCache::evictions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return evictions_;
}

}  // namespace moe
