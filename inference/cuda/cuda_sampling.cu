// The sampler's first steps on the device and a logits row's best k entries, so that
// a step reads back k candidates (8 bytes each) instead of the row (inference/sampler.cpp
// finishes on the host). Every entry becomes a 64-bit key whose ascending order is the
// sampler's: the higher value first, then the lower id; keys are unique, so the best k
// are one set whatever the order of the work.
//   pass 1, one block per chunk of kTopLogitsChunk entries: the chunk's keys staged in
//     shared memory (sanitised, then the penalised tokens of the chunk replaced by their
//     penalised values), sorted (bitonic), the first k written to scratch[block][0..k);
//   pass 2, one block: the blocks' m = blocks x k keys, the first kMerge sorted, then a
//     tile at a time beside the best k so far, the best k kept; written out as (value,
//     id). One sort while m <= kMerge (gpt-oss's 201,088 entries at k = 41: 99 x 41).
// k = 1 (greedy) takes block minimum reductions in both passes instead of sorts, and
// writes the argmax's id where the next step's embed reads its token, so that step can
// be queued before the host has read it; that step's penalty then names the token
// where it lies (`chosen`), not in the list. A sampled step queued ahead draws its token
// from the k entries after this (cuda_draw.cu), into the same place.
// Reads the row once; pass 2 reads blocks x k keys (8 bytes each).
#include <cfloat>
#include <cstdint>

#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda/cuda_launch.h"

namespace moe::cuda {
namespace {

constexpr int kChunkThreads = 512;
constexpr int kMerge = 4096;  // keys pass 2 sorts at once: the first, then the best k and a tile
constexpr int kMergeThreads = 1024;
constexpr uint64_t kNoKey = ~uint64_t{0};  // after every real key: an entry past the row

static_assert(kMaxTopLogits <= kTopLogitsChunk && kMaxTopLogits < kMerge, "k fits a chunk and a merge tile");

__device__ float sanitised(float x) {
  if (x != x) return -INFINITY;
  return x == INFINITY ? FLT_MAX : x;
}

__device__ float penalised(float x, float penalty) {
  return x > 0.0f ? __fdiv_rn(x, penalty) : __fmul_rn(x, penalty);
}

// Ascending keys = the sampler's order. -0 and +0 are one value (they compare equal).
__device__ uint64_t keyOf(float v, int32_t id) {
  uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // ascending with the value
  return (static_cast<uint64_t>(~u) << 32) | static_cast<uint32_t>(id);
}

__device__ TopLogit entryOf(uint64_t key) {
  if (key == kNoKey) return {-INFINITY, -1};
  const uint32_t u = ~static_cast<uint32_t>(key >> 32);
  const uint32_t bits = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
  return {__uint_as_float(bits), static_cast<int32_t>(static_cast<uint32_t>(key))};
}

__device__ uint64_t smaller(uint64_t a, uint64_t b) { return a < b ? a : b; }

// The smallest of every thread's v, in thread 0 (warp_min: [kThreads / 32]).
template <int kThreads>
__device__ uint64_t blockMin(uint64_t v, uint64_t* warp_min) {
  for (int off = 16; off > 0; off /= 2) v = smaller(v, __shfl_down_sync(0xffffffffu, v, off));
  if (threadIdx.x % 32 == 0) warp_min[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kThreads / 32; ++w) v = smaller(v, warp_min[w]);
  return v;
}

// keys[0, kN) ascending (kN a power of two); every thread of the block takes part.
template <int kN, int kThreads>
__device__ void bitonicSort(uint64_t* keys) {
  for (int size = 2; size <= kN; size *= 2)
    for (int stride = size / 2; stride > 0; stride /= 2) {
      for (int t = threadIdx.x; t < kN / 2; t += kThreads) {
        const int lo = 2 * t - (t & (stride - 1));  // the pair's index with bit `stride` clear
        const int hi = lo + stride;
        const bool ascending = (lo & size) == 0;
        const uint64_t a = keys[lo], b = keys[hi];
        if ((a > b) == ascending) {
          keys[lo] = b;
          keys[hi] = a;
        }
      }
      __syncthreads();
    }
}

// Block b: entries [b * kTopLogitsChunk, ..) of the row; its best k keys, best first,
// to out[b][0..k) (k = 1: out[b]).
__global__ void chunkBestKernel(const float* logits, int n_vocab, const SamplingValues* values,
                                const int32_t* chosen, int k, uint64_t* out) {
  __shared__ uint64_t keys[kTopLogitsChunk];
  __shared__ uint64_t warp_min[kChunkThreads / 32];
  __shared__ int chosen_listed;
  const int lo = static_cast<int>(blockIdx.x) * kTopLogitsChunk;
  const int n = n_vocab - lo < kTopLogitsChunk ? n_vocab - lo : kTopLogitsChunk;
  for (int i = threadIdx.x; i < kTopLogitsChunk; i += kChunkThreads)
    keys[i] = i < n ? keyOf(sanitised(logits[lo + i]), lo + i) : kNoKey;
  if (threadIdx.x == 0) chosen_listed = 0;
  __syncthreads();
  // The penalty after the sanitise, once per token (the ids are distinct: no two
  // threads write one key; the chosen token only where no listed id is it).
  const int count = values->count;
  const float by = values->penalty;
  const int extra = values->penalise_chosen && chosen ? *chosen : -1;
  const auto* ids = reinterpret_cast<const int32_t*>(values + 1);
  for (int j = threadIdx.x; j < count; j += kChunkThreads) {
    const int id = ids[j];
    if (id == extra) chosen_listed = 1;
    if (id >= lo && id - lo < n) keys[id - lo] = keyOf(penalised(sanitised(logits[id]), by), id);
  }
  __syncthreads();
  if (threadIdx.x == 0 && !chosen_listed && extra >= lo && extra - lo < n)
    keys[extra - lo] = keyOf(penalised(sanitised(logits[extra]), by), extra);
  __syncthreads();
  if (k == 1) {
    uint64_t best = kNoKey;
    for (int i = threadIdx.x; i < kTopLogitsChunk; i += kChunkThreads) best = smaller(best, keys[i]);
    best = blockMin<kChunkThreads>(best, warp_min);
    if (threadIdx.x == 0) out[blockIdx.x] = best;
    return;
  }
  bitonicSort<kTopLogitsChunk, kChunkThreads>(keys);
  for (int j = threadIdx.x; j < k; j += kChunkThreads) out[static_cast<size_t>(blockIdx.x) * k + j] = keys[j];
}

// One block: the best k of in[0, m), best first, as (value, id); k = 1 also to *chosen.
__global__ void mergeBestKernel(const uint64_t* in, int m, int k, TopLogit* out, int32_t* chosen) {
  __shared__ uint64_t keys[kMerge];
  __shared__ uint64_t warp_min[kMergeThreads / 32];
  if (k == 1) {
    uint64_t best = kNoKey;
    for (int i = threadIdx.x; i < m; i += kMergeThreads) best = smaller(best, in[i]);
    best = blockMin<kMergeThreads>(best, warp_min);
    if (threadIdx.x == 0) {
      const TopLogit e = entryOf(best);
      out[0] = e;
      // A row without a token (the host's sampler refuses it): a step already queued
      // on it embeds a valid row, and its result is dropped.
      if (chosen) *chosen = e.id >= 0 ? e.id : 0;
    }
    return;
  }
  // The first kMerge keys, then each further tile beside the best k so far.
  for (int i = threadIdx.x; i < kMerge; i += kMergeThreads) keys[i] = i < m ? in[i] : kNoKey;
  __syncthreads();
  bitonicSort<kMerge, kMergeThreads>(keys);  // ends with a barrier: the next tile may overwrite
  const int tile = kMerge - k;
  for (int first = kMerge; first < m; first += tile) {
    for (int i = threadIdx.x; i < tile; i += kMergeThreads)
      keys[k + i] = first + i < m ? in[first + i] : kNoKey;
    __syncthreads();
    bitonicSort<kMerge, kMergeThreads>(keys);
  }
  for (int i = threadIdx.x; i < k; i += kMergeThreads) out[i] = entryOf(keys[i]);
}

int chunks(int n_vocab) { return (n_vocab + kTopLogitsChunk - 1) / kTopLogitsChunk; }

}  // namespace

size_t topLogitsScratchBytes(int n_vocab, int k) {
  return static_cast<size_t>(chunks(n_vocab)) * static_cast<size_t>(k) * sizeof(uint64_t);
}

void launchTopLogits(const float* logits, int n_vocab, const SamplingValues* values, int k, void* scratch,
                     TopLogit* out, int32_t* chosen, cudaStream_t stream) {
  if (n_vocab <= 0 || k <= 0) return;
  const int blocks = chunks(n_vocab);
  auto* keys = static_cast<uint64_t*>(scratch);
  launchKernel(chunkBestKernel, static_cast<unsigned>(blocks), kChunkThreads, 0, stream, logits, n_vocab,
               values, static_cast<const int32_t*>(chosen), k, keys);
  checkLaunch("top logits kernel (chunks)");
  launchKernel(mergeBestKernel, 1, kMergeThreads, 0, stream, static_cast<const uint64_t*>(keys), blocks * k,
               k, out, chosen);
  checkLaunch("top logits kernel (merge)");
}

}  // namespace moe::cuda
