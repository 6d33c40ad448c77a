#include "offload/host_expert_store.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <sstream>
#include <string>

#include "inference/host_memory.h"

namespace moe {
namespace {

size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

std::string gigabytes(uint64_t b) {
  std::ostringstream s;
  s.precision(2);
  s << std::fixed << b / 1e9 << " GB";
  return s.str();
}

const WeightView& chunkOf(const ExpertWeights& w, int chunk) {
  return chunk == 0 ? w.gate : chunk == 1 ? w.up : w.down;
}
WeightView& chunkOf(ExpertWeights& w, int chunk) { return chunk == 0 ? w.gate : chunk == 1 ? w.up : w.down; }

// The largest chunk sizes over all MoE layers: the one layout every expert uses.
void largestChunks(const Model& model, size_t bytes[HostExpertStore::kChunks]) {
  for (const auto& layer : model.hostExperts())
    for (const auto& e : layer)
      for (int c = 0; c < HostExpertStore::kChunks; ++c) bytes[c] = std::max(bytes[c], chunkOf(e, c).bytes());
}

size_t paddedExpertBytes(const size_t bytes[HostExpertStore::kChunks]) {
  size_t total = 0;
  for (int c = 0; c < HostExpertStore::kChunks; ++c)
    total += alignUp(bytes[c], HostExpertStore::kChunkAlignment);
  return total;
}

size_t moeLayers(const Model& model) {
  size_t n = 0;
  for (const auto& layer : model.hostExperts()) n += !layer.empty();
  return n;
}

}  // namespace

uint64_t HostExpertStore::bytesNeeded(const Model& model) {
  size_t bytes[kChunks] = {};
  largestChunks(model, bytes);
  return uint64_t(paddedExpertBytes(bytes)) * model.config().n_expert * moeLayers(model);
}

uint64_t HostExpertStore::availableRam() { return availableMemoryBytes(); }

void HostExpertStore::checkFits(uint64_t needed, uint64_t available) {
  constexpr uint64_t kSystemReserve = 1ull << 30;
  if (available != 0 && needed + kSystemReserve > available)
    throw HostMemoryError("the expert store needs " + gigabytes(needed) + " of host RAM but only " +
                          gigabytes(available) +
                          " is available (1 GiB is kept for the system); close other programs or "
                          "choose a smaller quant of this model");
}

namespace {
class AlignedHostAllocator final : public HostAllocator {
 public:
  uint8_t* allocate(size_t bytes) override {
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(4096, alignUp(std::max<size_t>(bytes, 1), 4096)));
    if (!p) throw std::bad_alloc();
    return p;
  }
  void deallocate(uint8_t* p, size_t) override { std::free(p); }
  const char* name() const override { return "aligned"; }
};
}  // namespace

HostExpertStore::HostExpertStore(const Model& model, std::shared_ptr<HostAllocator> allocator)
    : n_layer_(model.config().n_layer),
      n_expert_(model.config().n_expert),
      allocator_(allocator ? std::move(allocator) : std::make_shared<AlignedHostAllocator>()) {
  largestChunks(model, chunk_bytes_);
  size_t offset = 0;
  for (int c = 0; c < kChunks; ++c) {
    chunk_offset_[c] = offset;
    offset += alignUp(chunk_bytes_[c], kChunkAlignment);
  }
  expert_bytes_ = offset;
  const auto& table = model.hostExperts();
  layer_index_.assign(n_layer_, -1);
  templates_.resize(n_layer_);
  int moe_index = 0;
  for (int il = 0; il < n_layer_; ++il) {
    if (table[il].empty()) continue;
    layer_index_[il] = moe_index++;
    templates_[il] = table[il][0];
  }
  total_bytes_ = expert_bytes_ * size_t(n_expert_) * size_t(moe_index);
  checkFits(total_bytes_, availableRam());

  try {
    data_ = allocator_->allocate(total_bytes_);
  } catch (const std::exception& e) {
    throw HostMemoryError("could not allocate " + gigabytes(total_bytes_) + " of " + allocator_->name() +
                          " memory for the expert store: " + e.what());
  }
  // The destructor does not run when the constructor throws below.
  struct FreeOnThrow {
    HostExpertStore* store;
    ~FreeOnThrow() {
      if (store) store->allocator_->deallocate(store->data_, store->total_bytes_);
    }
  } guard{this};
  std::memset(data_, 0, total_bytes_);  // padding between chunks is defined
  for (int il = 0; il < n_layer_; ++il) {
    if (layer_index_[il] < 0) continue;
    for (int e = 0; e < n_expert_; ++e) {
      uint8_t* dst = data_ + (size_t(layer_index_[il]) * n_expert_ + e) * expert_bytes_;
      for (int c = 0; c < kChunks; ++c) {
        const WeightView& w = chunkOf(table[il][e], c);
        if (w.bytes() > chunk_bytes_[c] || w.type != chunkOf(templates_[il], c).type)
          throw ModelError("layer " + std::to_string(il) + " expert " + std::to_string(e) +
                           " differs in shape or type from the layer's other experts");
        std::memcpy(dst + chunk_offset_[c], w.data, w.bytes());
      }
    }
  }
  guard.store = nullptr;
}

HostExpertStore::~HostExpertStore() { allocator_->deallocate(data_, total_bytes_); }

bool HostExpertStore::hasLayer(int layer) const {
  return layer >= 0 && layer < n_layer_ && layer_index_[layer] >= 0;
}

const uint8_t* HostExpertStore::expertData(int layer, int expert) const {
  if (!hasLayer(layer) || expert < 0 || expert >= n_expert_)
    throw std::out_of_range("no expert " + std::to_string(expert) + " in layer " + std::to_string(layer));
  return data_ + (size_t(layer_index_[layer]) * n_expert_ + expert) * expert_bytes_;
}

ExpertWeights HostExpertStore::viewAt(int layer, const uint8_t* base) const {
  if (!hasLayer(layer)) throw std::out_of_range("layer " + std::to_string(layer) + " has no routed experts");
  ExpertWeights w = templates_[layer];
  for (int c = 0; c < kChunks; ++c) chunkOf(w, c).data = base + chunk_offset_[c];
  return w;
}

}  // namespace moe
