// The device expert cache: one contiguous slab of N equal slots (slot_bytes
// each), allocated through a SlotMemory seam (host memory, or cudaMalloc), and
// the SlotTable that says what each slot holds (offload/slot_table.h: states,
// eviction, staging and held slots, the copy queue's per-slot counts).
//
// One lock guards all slot state: mutex(). Every method here takes it; the
// TransferWorker, which changes the table as copies are queued and land, takes it
// once and works on table() directly (its queues are guarded by the same lock).
// slotData() pointers are stable for the cache's life; a slot's bytes may only be
// read while READY and protected (pinned / computing layer / held).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "offload/slot_table.h"

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

class ExpertCache {
 public:
  // memory: null = HostSlotMemory. slot_bytes is rounded up to 256 so slots stay aligned.
  ExpertCache(int n_slots, size_t slot_bytes, int n_layers, int chunks_per_expert = 3,
              std::unique_ptr<SlotMemory> memory = nullptr);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  int slotCount() const { return table_.slotCount(); }  // fixed for the cache's life
  size_t slotBytes() const { return slot_bytes_; }
  int chunksPerExpert() const { return table_.chunksPerExpert(); }
  int layerShare() const;  // (slots - staging) / layers, at least 1
  uint8_t* slotData(int slot) const { return slab_ + static_cast<size_t>(slot) * slot_bytes_; }

  int find(int layer, int expert) const;  // slot, or -1
  SlotInfo info(int slot) const;
  // The slot of (layer, expert) if present (touched); else a fresh LOADING slot
  // (chunks_done 0), evicting per pickVictim; -1 when nothing can be evicted.
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

  // The one lock of the slot state, and the table it guards (the caller holds the lock).
  std::mutex& mutex() const { return mutex_; }
  SlotTable& table() { return table_; }
  const SlotTable& table() const { return table_; }

 private:
  mutable std::mutex mutex_;
  std::unique_ptr<SlotMemory> memory_;
  size_t slot_bytes_;
  uint8_t* slab_ = nullptr;
  SlotTable table_;
};

}  // namespace moe
