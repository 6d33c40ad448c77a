// Every routed expert's three matrices (gate, up, down) contiguous in host
// memory, in the file's element type (no conversion at load): the source of
// every host->device expert copy. One expert = kChunks chunks (chunked
// prefetching); each chunk starts 256-byte aligned so a device slot can use the
// same layout. The buffer comes from a HostAllocator: plain aligned memory, or
// pinned memory (cudaHostAlloc) when a GPU copies from it. Files that mix quant types across layers (Q4_K_M)
// give layers different chunk sizes: every expert is laid out with the largest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "inference/expert_source.h"
#include "inference/model.h"
#include "offload/expert_bytes_source.h"
#include "offload/host_allocator.h"

namespace moe {

class HostMemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class HostExpertStore final : public ExpertBytesSource {
 public:
  static constexpr size_t kChunkAlignment = 256;

  // Copies every routed expert of `model` out of the file. Checks the bytes
  // needed against the machine's available RAM first (HostMemoryError naming both).
  // allocator: null = page-aligned heap memory.
  explicit HostExpertStore(const Model& model, std::shared_ptr<HostAllocator> allocator = nullptr);
  ~HostExpertStore();
  HostExpertStore(const HostExpertStore&) = delete;
  HostExpertStore& operator=(const HostExpertStore&) = delete;

  int layers() const { return n_layer_; }
  int experts() const { return n_expert_; }
  bool hasLayer(int layer) const;                                // false for dense layers
  size_t expertBytes() const override { return expert_bytes_; }  // one expert, all chunks, padded
  size_t chunkOffset(int chunk) const override { return chunk_offset_[chunk]; }
  size_t chunkBytes(int chunk) const override { return chunk_bytes_[chunk]; }
  size_t totalBytes() const { return total_bytes_; }

  // The expert's kChunks chunks, expertBytes() long.
  const uint8_t* expertData(int layer, int expert) const override;
  // Weight views of an expert stored at `base` in this layout (host memory here,
  // or a cache slot that holds a copy of expertData()).
  ExpertWeights viewAt(int layer, const uint8_t* base) const;

  // Bytes the store would need for `model`, and the machine's available RAM
  // (MemAvailable of /proc/meminfo; 0 when unknown).
  static uint64_t bytesNeeded(const Model& model);
  static uint64_t availableRam();
  // Throws HostMemoryError unless `needed` fits in `available` with 1 GiB left for
  // the rest of the system (available == 0: unknown, not checked).
  static void checkFits(uint64_t needed, uint64_t available);

 private:
  int n_layer_ = 0, n_expert_ = 0;
  size_t chunk_offset_[kChunks] = {}, chunk_bytes_[kChunks] = {};
  size_t expert_bytes_ = 0, total_bytes_ = 0;
  std::vector<int> layer_index_;          // [n_layer] index among MoE layers, -1 for dense
  std::vector<ExpertWeights> templates_;  // [n_layer] shapes and types (data unset)
  std::shared_ptr<HostAllocator> allocator_;
  uint8_t* data_ = nullptr;
};

}  // namespace moe
