#include "offload/slot_slab.h"

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
int checkedSlots(int n_slots, size_t slot_bytes) {
  if (n_slots <= 0 || slot_bytes == 0)
    throw std::invalid_argument("SlotSlab: need slots > 0, slot_bytes > 0");
  return n_slots;
}
}  // namespace

SlotSlab::SlotSlab(int n_slots, size_t slot_bytes, std::unique_ptr<SlotMemory> memory)
    : memory_(memory ? std::move(memory) : std::make_unique<HostSlotMemory>()),
      n_slots_(checkedSlots(n_slots, slot_bytes)),
      slot_bytes_((slot_bytes + 255) / 256 * 256) {
  slab_ = memory_->allocate(slot_bytes_ * static_cast<size_t>(n_slots_));
}

SlotSlab::~SlotSlab() { memory_->deallocate(slab_, slot_bytes_ * static_cast<size_t>(n_slots_)); }

}  // namespace moe
