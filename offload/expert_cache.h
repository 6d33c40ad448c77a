// The device expert cache: one contiguous slab of N equal slots (slot_bytes
// each), allocated through a SlotMemory seam (host memory now, cudaMalloc later).
// Each slot is EMPTY, LOADING (chunks_done of kChunks copied) or READY and is
// owned by one (layer, expert).
//
// Eviction (reserve()): an EMPTY slot if there is one; otherwise a victim among
// the *evictable* slots: READY, not of the computing layer (setComputingLayer),
// not pinned (the current layer's execution order). LOADING slots are never
// evicted. Per-layer LRU as in ProMoE: when the requesting layer already holds at
// least its share (n_slots / n_layers, at least 1) the victim is that layer's
// least-recently-used evictable slot; otherwise (or when the layer has none
// evictable) the globally least-recently-used evictable slot. No evictable slot:
// reserve() returns -1 and the caller skips (prefetch) or reports unavailable.
// Recency is a logical clock bumped by touch(): on reserve (prefetch) and on use.
//
// Two additions for the static policy and prefill streaming:
// - staging slots (setStagingCount): the last n slots are kept out of reserve()
//   and loaded one expert at a time by loadStaging(); a layer that needs more
//   experts than its share streams them through these in execution order.
// - held slots (hold): pinned until releaseHolds(), across layers and tokens;
//   the static policy's most-used experts. Never evicted.
//
// Thread-safe: every method takes the cache's mutex. slotData() pointers are
// stable for the cache's life; a slot's bytes may only be read while READY and
// protected (pinned / computing layer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace moe {

// Where the slab lives. Host: aligned heap memory; CUDA: cudaMalloc/cudaFree.
class SlotMemory {
 public:
  virtual ~SlotMemory() = default;
  virtual uint8_t* allocate(size_t bytes) = 0;
  virtual void deallocate(uint8_t* p, size_t bytes) = 0;
};

class HostSlotMemory final : public SlotMemory {
 public:
  static constexpr size_t kAlignment = 256;
  uint8_t* allocate(size_t bytes) override;
  void deallocate(uint8_t* p, size_t bytes) override;
};

enum class SlotState : uint8_t { kEmpty, kLoading, kReady };

struct SlotInfo {
  SlotState state = SlotState::kEmpty;
  int layer = -1, expert = -1;
  int chunks_done = 0;
  bool predicted = false;  // reserved by a prediction (for prefetch-hit accounting)
  bool pinned = false;
  uint64_t last_use = 0;
  bool staging = false;  // a staging slot (never handed out by reserve())
  bool held = false;     // pinned across layers (static policy)
};

class ExpertCache {
 public:
  // memory: null = HostSlotMemory. slot_bytes is rounded up to 256 so slots stay aligned.
  ExpertCache(int n_slots, size_t slot_bytes, int n_layers, int chunks_per_expert = 3,
              std::unique_ptr<SlotMemory> memory = nullptr);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  int slotCount() const { return static_cast<int>(slots_.size()); }
  size_t slotBytes() const { return slot_bytes_; }
  int chunksPerExpert() const { return chunks_; }
  int layerShare() const;  // (slots - staging) / layers, at least 1
  uint8_t* slotData(int slot) const { return slab_ + static_cast<size_t>(slot) * slot_bytes_; }

  int find(int layer, int expert) const;  // slot, or -1
  SlotInfo info(int slot) const;
  // The slot of (layer, expert) if present (touched); else a fresh LOADING slot
  // (chunks_done 0), evicting per the rule above; -1 when nothing can be evicted.
  int reserve(int layer, int expert, bool predicted);
  // One more chunk copied; READY after the last. Returns the new state.
  SlotState markChunkDone(int slot);
  void markReady(int slot);  // all chunks at once (whole-expert copies)
  void free(int slot);       // back to EMPTY (never for a slot being written)
  void touch(int slot);

  void setComputingLayer(int layer);  // -1: none
  int computingLayer() const;
  void pin(int slot);
  void unpinAll();

  // Staging: makes the last n slots staging slots (they must be EMPTY; n < slots
  // unless every slot is staging by intent). stagingSlot(i): the i-th of them.
  void setStagingCount(int n);
  int stagingCount() const;
  int stagingSlot(int i) const;
  // A staging slot (EMPTY) becomes LOADING for (layer, expert); free() empties it.
  void loadStaging(int slot, int layer, int expert);

  // Static pins: a held slot is never evicted until releaseHolds().
  void hold(int slot);
  void releaseHolds();
  int heldCount() const;

  int countState(SlotState state) const;
  int residentCount(int layer) const;  // LOADING + READY slots of the layer (staging not counted)
  uint64_t evictions() const;

 private:
  static uint64_t key(int layer, int expert) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(layer)) << 32) | static_cast<uint32_t>(expert);
  }
  bool evictableLocked(const SlotInfo& s) const;
  int layerShareLocked() const;
  void touchLocked(int slot) { slots_[slot].last_use = ++clock_; }

  mutable std::mutex mutex_;
  std::unique_ptr<SlotMemory> memory_;
  size_t slot_bytes_;
  int n_layers_;
  int chunks_;
  uint8_t* slab_ = nullptr;
  std::vector<SlotInfo> slots_;
  std::unordered_map<uint64_t, int> index_;
  int computing_layer_ = -1;
  int staging_ = 0;
  uint64_t clock_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace moe
