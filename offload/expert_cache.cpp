#include "offload/expert_cache.h"

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

namespace {
int checkedSlots(int n_slots, size_t slot_bytes, int chunks_per_expert) {
  if (n_slots <= 0 || slot_bytes == 0 || chunks_per_expert <= 0)
    throw std::invalid_argument("ExpertCache: need slots > 0, slot_bytes > 0, chunks > 0");
  return n_slots;
}
}  // namespace

ExpertCache::ExpertCache(int n_slots, size_t slot_bytes, int n_layers, int chunks_per_expert,
                         std::unique_ptr<SlotMemory> memory)
    : memory_(memory ? std::move(memory) : std::make_unique<HostSlotMemory>()),
      slot_bytes_((slot_bytes + 255) / 256 * 256),
      table_(checkedSlots(n_slots, slot_bytes, chunks_per_expert), n_layers, chunks_per_expert) {
  slab_ = memory_->allocate(slot_bytes_ * static_cast<size_t>(n_slots));
}

ExpertCache::~ExpertCache() { memory_->deallocate(slab_, slot_bytes_ * static_cast<size_t>(slotCount())); }

int ExpertCache::layerShare() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.layerShare();
}

int ExpertCache::find(int layer, int expert) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.find(layer, expert);
}

SlotInfo ExpertCache::info(int slot) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.at(slot);
}

int ExpertCache::reserve(int layer, int expert, bool predicted) {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.reserve(layer, expert, predicted);
}

SlotState ExpertCache::markChunkDone(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.markChunkDone(slot);
}

void ExpertCache::markReady(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.markReady(slot);
}

void ExpertCache::free(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.free(slot);
}

void ExpertCache::touch(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.touch(slot);
}

void ExpertCache::setComputingLayer(int layer) {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.setComputingLayer(layer);
}

int ExpertCache::computingLayer() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.computingLayer();
}

void ExpertCache::pin(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.pin(slot);
}

void ExpertCache::unpinAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.unpinAll();
}

void ExpertCache::setStagingCount(int n) {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.setStagingCount(n);
}

int ExpertCache::stagingCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.stagingCount();
}

int ExpertCache::stagingSlot(int i) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.stagingSlot(i);
}

void ExpertCache::loadStaging(int slot, int layer, int expert) {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.loadStaging(slot, layer, expert);
}

void ExpertCache::hold(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.hold(slot);
}

void ExpertCache::releaseHolds() {
  std::lock_guard<std::mutex> lock(mutex_);
  table_.releaseHolds();
}

int ExpertCache::heldCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.heldCount();
}

int ExpertCache::countState(SlotState state) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.countState(state);
}

int ExpertCache::residentCount(int layer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.residentCount(layer);
}

uint64_t ExpertCache::evictions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_.evictions();
}

}  // namespace moe
