// The device expert cache's memory: one contiguous slab of N equal slots
// (slot_bytes each), allocated through a SlotMemory seam (host memory, or
// cudaMalloc). What each slot holds is the SlotTable's business
// (offload/slot_table.h), owned with its lock by the copy queue (TransferWorker).
//
// slotData() pointers are stable for the slab's life; a slot's bytes may only be
// read while its table entry is READY and protected (pinned / computing layer / held).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

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

class SlotSlab {
 public:
  // memory: null = HostSlotMemory. slot_bytes is rounded up to 256 so slots stay aligned.
  SlotSlab(int n_slots, size_t slot_bytes, std::unique_ptr<SlotMemory> memory = nullptr);
  ~SlotSlab();
  SlotSlab(const SlotSlab&) = delete;
  SlotSlab& operator=(const SlotSlab&) = delete;

  int slotCount() const { return n_slots_; }
  size_t slotBytes() const { return slot_bytes_; }
  uint8_t* slotData(int slot) const { return slab_ + static_cast<size_t>(slot) * slot_bytes_; }

 private:
  std::unique_ptr<SlotMemory> memory_;
  int n_slots_;
  size_t slot_bytes_;
  uint8_t* slab_ = nullptr;
};

}  // namespace moe
