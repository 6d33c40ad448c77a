// Causal grouped-query attention over the device KV cache (Backend::attention):
// q, out: [n_tokens][n_head][head_dim] float; k_cache, v_cache: [n_ctx][n_head_kv][head_dim]
// half (the CUDA backend's KV cache is F16: launchStoreHalf rounds each stored value
// to nearest even); query (t, h) attends to cache rows 0 .. pos0 + t of kv head
// h / (n_head / n_head_kv). K and V are widened to float as they are loaded; every
// product and sum is in float.
//
// Rows. For one kv head the query rows are the pairs (t, g), t < n_tokens, g < group
// (group = n_head / n_head_kv), numbered r = t * group + g: the group's heads of one
// token are neighbours, so a block of rows shares one kv head and spans few tokens.
// Row r sees keys 0 .. pos0 + r / group (its causal limit); with a sliding window
// (gpt-oss's even layers) only the last `window` of them: a block starts at its first
// row's window and masks the keys before each row's. A head's sink logit (gpt-oss)
// joins the softmax's denominator when the output is divided by it (withSink).
//
// Decode (n_tokens <= kDecodeMaxTokens): flash-decoding. The keys 0 .. pos0+n_tokens-1
// are cut into n_chunks chunks of chunk_keys; grid = (chunk, kv head x row block), a
// row block being up to R = 8 rows of one kv head, so for one token and group <= 8
// each K/V row is read by exactly one block. In a block of 4 warps, warps take keys
// and lanes take head dims: a key is handled by lanes_per_key lanes (32, or fewer for
// a small head_dim, so a warp then takes several keys at once), each holding NV
// vectors of VEC halves (8: one 16-byte load, when head_dim % 8 == 0 and K and V are
// 16-byte aligned, lanes_per_key = head_dim / 8 rounded up to a power of two, e.g. 16
// for head_dim 128, two keys per warp load; else 1: 2-byte loads, lanes_per_key 32
// for head_dim > 32), and each lane loads 2 keys per step, their K and V vectors in
// flight together and kept as half bits until used. Per key the R dot products are
// summed over the key's lanes by xor shuffles; each warp keeps per row an online
// softmax (max m, sum l, weighted V sum acc), rescaled once per step (every row of
// the block uses the same K/V vectors). The warps' states merge in shared memory
// (scale exp(m_w - m_max)); with one chunk the block writes out = acc / l, else it
// writes its (m, l, acc) to the scratch partials and attentionMergeKernel (a block
// per query row) combines the chunks the same way. Chunks: enough for
// ~kTargetBlocks blocks, none shorter than kMinChunkKeys keys (a 4,096-key context
// with 8 kv heads: 32 chunks of 128 keys, 256 blocks; a context of <= 64 keys: one
// chunk, no merge kernel).
//
// Prefill (more tokens): tiled flash attention in float, cuda_attention_prefill.cu.
//
// Bytes read, against the minimum (every K and V row of the context once per kv
// head: 2 * n_keys * kv_width * 2 bytes, kv_width = n_head_kv * head_dim; half the
// bytes of an F32 cache):
//   decode   the minimum x row blocks per kv head (1 for one token and group <= 8),
//            plus the partials (float) written and read: 2 * n_tokens * n_head *
//            n_chunks * (head_dim + 2) * 4 (4,096 keys, 8 kv heads, group 4, head_dim
//            128: 16.8 MB of K/V and 1.1 MB of partials, 6% over the minimum);
//   prefill  per kv head, each BQ-row tile reads the K/V rows up to its last row's
//            limit: about ceil(n_tokens * group / BQ) x the minimum times the causal
//            share (~half for pos0 = 0), BQ x less than one pass per query row.
// Mathematically the CPU backend's softmax over the half-rounded K and V; only the
// float rounding order differs.
#include <math.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "inference/cuda/cuda_attention.cuh"
#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda/cuda_launch.h"

namespace moe::cuda {
namespace {

using namespace attn;

int pow2Ceil(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// A lane's share of one K or V row in the decode kernel: NV vectors of VEC halves,
// as loaded (raw bits; widened to float by at() where used). Vector c holds dims
// (c * lanes_per_key + sub) * VEC .. + VEC - 1; dims at or past head_dim hold 0.
template <int VEC, int NV>
struct RowShare;

template <int NV>
struct RowShare<8, NV> {  // 16-byte loads: head_dim % 8 == 0, rows 16-byte aligned
  uint4 w[NV];
  __device__ __forceinline__ void load(const __half* row, int sub, int lanes_per_key, int head_dim) {
#pragma unroll
    for (int c = 0; c < NV; ++c) {
      const int d = (c * lanes_per_key + sub) * 8;
      w[c] = make_uint4(0u, 0u, 0u, 0u);
      if (d < head_dim) w[c] = __ldg(reinterpret_cast<const uint4*>(row + d));
    }
  }
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int c = 0; c < NV; ++c) w[c] = make_uint4(0u, 0u, 0u, 0u);
  }
  // Dim i of the lane's 8 * NV (i a compile-time constant once unrolled). The "% NV"
  // (a no-op: i < 8 * NV) keeps each NV's code distinct, so a host compiler building
  // the stand-in cannot fold the instantiations into one and then warn about bounds.
  __device__ __forceinline__ float at(int i) const {
    const uint4& v = w[i / 8 % NV];
    const int e = i % 8;
    const uint32_t word = e < 2 ? v.x : e < 4 ? v.y : e < 6 ? v.z : v.w;
    return e % 2 == 0 ? lowHalf(word) : highHalf(word);
  }
};

template <int NV>
struct RowShare<1, NV> {  // 2-byte loads: any head_dim and alignment
  unsigned short h[NV];
  __device__ __forceinline__ void load(const __half* row, int sub, int lanes_per_key, int head_dim) {
    const auto* bits = reinterpret_cast<const unsigned short*>(row);
#pragma unroll
    for (int c = 0; c < NV; ++c) {
      const int d = c * lanes_per_key + sub;
      h[c] = d < head_dim ? __ldg(bits + d) : static_cast<unsigned short>(0);
    }
  }
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int c = 0; c < NV; ++c) h[c] = 0;
  }
  __device__ __forceinline__ float at(int i) const { return __half2float(__ushort_as_half(h[i])); }
};

// ---------------------------------------------------------------------------
// Decode: flash-decoding

constexpr int kMinChunkKeys = 64;   // no chunk shorter (the merge costs a partial per row)
constexpr int kTargetBlocks = 256;  // ~2 blocks per SM on a 132-SM GPU
constexpr int kMaxChunks = 256;     // the merge kernel's shared weights
constexpr int kMaxDecodeRows = 8;   // rows per block
constexpr int kWideDecodeRows = 2;  // rows per block for head_dim > 256 (registers, shared memory)
constexpr int kKeysPerLane = 2;     // keys a lane loads per step (their K and V in flight together)

int decodeRowsPerBlock(int n_rows, int head_dim) {
  const int r = pow2Ceil(n_rows);
  const int most = head_dim > kNarrowHeadDim ? kWideDecodeRows : kMaxDecodeRows;
  return r < most ? r : most;
}

// grid (n_chunks, n_head_kv * row_blocks), kThreads threads. partial (n_chunks > 1):
// m [items][n_chunks], l [items][n_chunks], acc [items][n_chunks][head_dim], items =
// n_tokens * n_head. (Launch bounds of 2 blocks per SM still allow 255 registers: with
// R = 8 and 8 dims a lane ptxas 13 uses 254 on sm_89, 249 on sm_90, no spills; check
// -Xptxas -v after changing the loop.)
template <int VEC, int NV, int R>
__global__ void __launch_bounds__(kThreads, 2)
    attentionDecodeKernel(const float* __restrict__ q, const __half* __restrict__ k_cache,
                          const __half* __restrict__ v_cache, int pos0_arg,
                          const int32_t* __restrict__ pos0_dev, int n_tokens, int n_head, int n_head_kv,
                          int head_dim, float scale, const float* __restrict__ sinks, int window,
                          int lanes_per_key, int chunk_keys, float* __restrict__ out,
                          float* __restrict__ partial) {
  constexpr int D = VEC * NV;  // dims per lane
  const int pos0 = pos0_dev ? *pos0_dev : pos0_arg;
  constexpr int KT = kKeysPerLane;
  __shared__ float sm_m[kWarps][R], sm_l[kWarps][R];
  __shared__ float sm_acc[kWarps][R][32 * D];

  const int group = n_head / n_head_kv;
  const int n_rows = n_tokens * group;
  const int row_blocks = (n_rows + R - 1) / R;
  const int kvh = blockIdx.y / row_blocks;
  const int row0 = (blockIdx.y % row_blocks) * R;
  const int chunk = blockIdx.x, n_chunks = gridDim.x;
  // A sliding window hides the keys before the block's first row's window.
  const int window_begin = window > 0 ? pos0 + row0 / group - window + 1 : 0;
  const int key_begin = chunk * chunk_keys > window_begin ? chunk * chunk_keys : window_begin;
  const int key_end = imin(pos0 + n_tokens, chunk * chunk_keys + chunk_keys);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int lpk = lanes_per_key, slots = 32 / lpk;  // a warp takes `slots` keys at once
  const int slot = lane / lpk, sub = lane % lpk;
  const size_t kv_stride = static_cast<size_t>(n_head_kv) * head_dim;
  const __half* k_head = k_cache + static_cast<size_t>(kvh) * head_dim;
  const __half* v_head = v_cache + static_cast<size_t>(kvh) * head_dim;

  float qr[R][D], acc[R][D], m[R], l[R];
  int limit[R];  // last key row r sees (-1 past n_rows); with a window, from limit - window + 1
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = row0 + r;
    limit[r] = -1;
#pragma unroll
    for (int i = 0; i < D; ++i) qr[r][i] = 0.0f, acc[r][i] = 0.0f;
    if (row < n_rows) {
      const int t = row / group, h = kvh * group + row % group;
      limit[r] = pos0 + t;
      const float* qrow = q + (static_cast<size_t>(t) * n_head + h) * head_dim;
#pragma unroll
      for (int i = 0; i < D; ++i) {  // the lane's dims, as RowShare holds them
        const int d = (i / VEC * lpk + sub) * VEC + i % VEC;
        if (d < head_dim) qr[r][i] = __ldg(qrow + d);
      }
    }
    m[r] = -INFINITY, l[r] = 0.0f;
  }

  // Warp-uniform trip count: every shuffle below has all 32 lanes.
  for (int base = key_begin + warp * KT * slots; base < key_end; base += kWarps * KT * slots) {
    RowShare<VEC, NV> kx[KT], vx[KT];
    int key[KT];
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      key[kt] = base + kt * slots + slot;
      if (key[kt] < key_end) {
        const size_t off = static_cast<size_t>(key[kt]) * kv_stride;
        kx[kt].load(k_head + off, sub, lpk, head_dim);
        vx[kt].load(v_head + off, sub, lpk, head_dim);
      } else {
        kx[kt].clear();
        vx[kt].clear();
      }
    }
    float s[KT][R];  // scores, then probabilities
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      float dot[R];
#pragma unroll
      for (int r = 0; r < R; ++r) dot[r] = 0.0f;
#pragma unroll
      for (int i = 0; i < D; ++i) {
        const float kf = kx[kt].at(i);
#pragma unroll
        for (int r = 0; r < R; ++r) dot[r] += qr[r][i] * kf;
      }
#pragma unroll
      for (int r = 0; r < R; ++r) {
#pragma unroll
        for (int o = 16; o > 0; o /= 2)  // over the key's lanes
          if (o < lpk) dot[r] += __shfl_xor_sync(kFull, dot[r], o);
        const bool seen =
            key[kt] < key_end && key[kt] <= limit[r] && (window <= 0 || key[kt] > limit[r] - window);
        s[kt][r] = seen ? dot[r] * scale : -INFINITY;
      }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float m_step = s[0][r];
#pragma unroll
      for (int kt = 1; kt < KT; ++kt) m_step = fmaxf(m_step, s[kt][r]);
#pragma unroll
      for (int o = 16; o > 0; o /= 2)  // over the slots
        if (o >= lpk) m_step = fmaxf(m_step, __shfl_xor_sync(kFull, m_step, o));
      const float m_new = fmaxf(m[r], m_step);
      const float m_ref = m_new == -INFINITY ? 0.0f : m_new;  // no key of this row yet: all terms 0
      const float correction = expf(m[r] - m_ref);            // 0 while m = -inf
      l[r] *= correction;
#pragma unroll
      for (int i = 0; i < D; ++i) acc[r][i] *= correction;
#pragma unroll
      for (int kt = 0; kt < KT; ++kt) {
        s[kt][r] = expf(s[kt][r] - m_ref);  // 0 for a masked key
        l[r] += s[kt][r];
      }
      m[r] = m_new;
    }
#pragma unroll
    for (int kt = 0; kt < KT; ++kt)
#pragma unroll
      for (int i = 0; i < D; ++i) {
        const float vf = vx[kt].at(i);
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r][i] += s[kt][r] * vf;
      }
  }
  // The slots' sums (m is the warp's): every lane then holds the warp's l and its dims' acc.
#pragma unroll
  for (int o = 1; o < 32; o *= 2)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (o < lpk) continue;  // within a key's lanes: the same sums already
      l[r] += __shfl_xor_sync(kFull, l[r], o);
#pragma unroll
      for (int i = 0; i < D; ++i) acc[r][i] += __shfl_xor_sync(kFull, acc[r][i], o);
    }

  if (slot == 0)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int i = 0; i < D; ++i) sm_acc[warp][r][(i / VEC * lpk + sub) * VEC + i % VEC] = acc[r][i];
  if (lane == 0)
#pragma unroll
    for (int r = 0; r < R; ++r) sm_m[warp][r] = m[r], sm_l[warp][r] = l[r];
  __syncthreads();

  const int items = n_tokens * n_head;
  for (int idx = threadIdx.x; idx < R * head_dim; idx += kThreads) {
    const int r = idx / head_dim, d = idx % head_dim;
    const int row = row0 + r;
    if (row >= n_rows) continue;
    float m_all = -INFINITY;
    for (int w = 0; w < kWarps; ++w) m_all = fmaxf(m_all, sm_m[w][r]);
    float l_all = 0.0f, o = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (sm_m[w][r] != -INFINITY) {  // a warp without a key of this row adds nothing
        const float weight = expf(sm_m[w][r] - m_all);
        l_all += sm_l[w][r] * weight;
        o += sm_acc[w][r][d] * weight;
      }
    const size_t item = static_cast<size_t>(row / group) * n_head + kvh * group + row % group;
    if (n_chunks == 1) {  // the row's own key is in the chunk: m_all finite, l_all >= 1
      if (sinks) withSink(sinks[kvh * group + row % group], m_all, l_all, o);
      out[item * head_dim + d] = o / l_all;
    } else {
      const size_t part = item * n_chunks + chunk;
      partial[2 * static_cast<size_t>(items) * n_chunks + part * head_dim + d] = o;
      if (d == 0) {
        partial[part] = m_all;  // -inf, l 0 and acc 0 for a row with no key in this chunk
        partial[static_cast<size_t>(items) * n_chunks + part] = l_all;
      }
    }
  }
}

// grid n_items, kThreads threads: out[item] = sum_c acc_c * e^(m_c - m) / sum_c l_c * e^(m_c - m).
__global__ void __launch_bounds__(kThreads)
    attentionMergeKernel(const float* __restrict__ partial, int n_items, int n_chunks, int head_dim,
                         int n_head, const float* __restrict__ sinks, float* __restrict__ out) {
  __shared__ float weight[kMaxChunks];
  const size_t item = blockIdx.x;
  const float* pm = partial + item * n_chunks;
  const float* pl = partial + static_cast<size_t>(n_items) * n_chunks + item * n_chunks;
  const float* pacc = partial + 2 * static_cast<size_t>(n_items) * n_chunks + item * n_chunks * head_dim;
  float m_max = -INFINITY;
  for (int c = 0; c < n_chunks; ++c) m_max = fmaxf(m_max, pm[c]);  // finite: a chunk holds the row's own key
  for (int c = threadIdx.x; c < n_chunks; c += kThreads)
    weight[c] = pm[c] == -INFINITY ? 0.0f : expf(pm[c] - m_max);
  __syncthreads();
  float l_all = 0.0f;
  for (int c = 0; c < n_chunks; ++c) l_all += pl[c] * weight[c];
  for (int d = threadIdx.x; d < head_dim; d += kThreads) {
    float o = 0.0f, l = l_all;
    for (int c = 0; c < n_chunks; ++c) o += pacc[static_cast<size_t>(c) * head_dim + d] * weight[c];
    if (sinks) withSink(sinks[item % n_head], m_max, l, o);
    out[item * head_dim + d] = o / l;
  }
}

// How a decode is cut: chunks and rows per block (independent of pointer alignment,
// so attentionScratchBytes can compute it from the shape alone).
struct DecodePlan {
  int rows_per_block, row_blocks, n_chunks, chunk_keys;
};

DecodePlan decodePlan(int pos0, int n_tokens, int n_head, int n_head_kv, int head_dim) {
  DecodePlan p;
  const int n_rows = n_tokens * (n_head / n_head_kv);
  p.rows_per_block = decodeRowsPerBlock(n_rows, head_dim);
  p.row_blocks = (n_rows + p.rows_per_block - 1) / p.rows_per_block;
  const int n_keys = pos0 + n_tokens;
  const int blocks_y = n_head_kv * p.row_blocks;
  int chunks = (n_keys + kMinChunkKeys - 1) / kMinChunkKeys;
  const int for_target = (kTargetBlocks + blocks_y - 1) / blocks_y;
  if (chunks > for_target) chunks = for_target;
  if (chunks > kMaxChunks) chunks = kMaxChunks;
  if (chunks < 1) chunks = 1;
  p.chunk_keys = (n_keys + chunks - 1) / chunks;
  p.n_chunks = (n_keys + p.chunk_keys - 1) / p.chunk_keys;  // no empty chunk
  return p;
}

template <int VEC, int NV, int R>
void launchDecodeRows(const DecodePlan& p, int lanes_per_key, const AttentionArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.n_chunks), static_cast<unsigned>(a.n_head_kv * p.row_blocks));
  launchKernel(attentionDecodeKernel<VEC, NV, R>, grid, kThreads, 0, stream, a.q, a.k, a.v, a.pos0,
               a.pos0_dev, a.n_tokens, a.n_head, a.n_head_kv, a.head_dim, a.scale, a.sinks, a.window,
               lanes_per_key, p.chunk_keys, a.out, a.partial);
}

template <int VEC, int NV>
void launchDecode(const DecodePlan& p, int lanes_per_key, const AttentionArgs& a, cudaStream_t stream) {
  switch (p.rows_per_block) {
    case 1: return launchDecodeRows<VEC, NV, 1>(p, lanes_per_key, a, stream);
    case 2: return launchDecodeRows<VEC, NV, 2>(p, lanes_per_key, a, stream);
    default:
      if constexpr (VEC * NV <= 8) {  // a wide head's 4 or 8 rows would not fit the registers
        if (p.rows_per_block == 4) return launchDecodeRows<VEC, NV, 4>(p, lanes_per_key, a, stream);
        if (p.rows_per_block == 8) return launchDecodeRows<VEC, NV, 8>(p, lanes_per_key, a, stream);
      }
      throw std::logic_error("attention: no decode kernel for " + std::to_string(p.rows_per_block) + " rows");
  }
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Element i < n of src into dst and, with src2, element i of src2 into dst2 (k and v).
// With first_row (device memory): dst and dst2 start *first_row rows of row_elems further.
__global__ void storeHalfKernel(const float* __restrict__ src, __half* __restrict__ dst,
                                const float* __restrict__ src2, __half* __restrict__ dst2, size_t n,
                                const int32_t* __restrict__ first_row, size_t row_elems) {
  if (first_row) {
    const size_t offset = static_cast<size_t>(*first_row) * row_elems;
    dst += offset;
    if (dst2) dst2 += offset;
  }
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    dst[i] = __float2half_rn(src[i]);
    if (src2) dst2[i] = __float2half_rn(src2[i]);
  }
}

}  // namespace

void launchStoreHalf(const float* src, __half* dst, const float* src2, __half* dst2, size_t n,
                     cudaStream_t stream, const int32_t* first_row, size_t row_elems) {
  if (n == 0) return;
  constexpr int kStoreThreads = 256;
  const size_t blocks = (n + kStoreThreads - 1) / kStoreThreads;
  launchKernel(storeHalfKernel, static_cast<unsigned>(blocks < 65536 ? blocks : 65536), kStoreThreads, 0,
               stream, src, dst, src2, dst2, n, first_row, row_elems);
  checkLaunch("KV cache store kernel");
}

size_t attentionScratchBytes(int pos0, int n_tokens, int n_head, int n_head_kv, int head_dim) {
  if (n_tokens <= 0 || n_tokens > kDecodeMaxTokens || n_head <= 0 || n_head_kv <= 0 || head_dim <= 0)
    return 0;
  const DecodePlan p = decodePlan(pos0, n_tokens, n_head, n_head_kv, head_dim);
  if (p.n_chunks == 1) return 0;
  return static_cast<size_t>(n_tokens) * n_head * p.n_chunks * (head_dim + 2) * sizeof(float);
}

size_t attentionScratchBytesUpTo(int n_ctx, int n_head, int n_head_kv, int head_dim) {
  size_t most = 0;
  for (int n = 1; n <= kDecodeMaxTokens; ++n) {
    const int last = n_ctx - n;  // the last pos0 at which n tokens fit
    for (int pos0 = 0; pos0 <= last; pos0 = pos0 == last ? last + 1 : std::min(pos0 + 64, last))
      most = std::max(most, attentionScratchBytes(pos0, n, n_head, n_head_kv, head_dim));
  }
  return most;
}

void launchAttention(const float* q, const __half* k_cache, const __half* v_cache, int pos0, int n_tokens,
                     int n_head, int n_head_kv, int head_dim, float scale, const float* sinks, int window,
                     float* out, float* scratch, size_t scratch_bytes, cudaStream_t stream,
                     const DevicePosition& device_pos) {
  if (n_tokens <= 0) return;
  if (n_head <= 0 || n_head_kv <= 0 || n_head % n_head_kv != 0 || head_dim <= 0 || head_dim > kMaxHeadDim ||
      pos0 < 0 || window < 0)
    throw std::invalid_argument("attention: bad shape");
  if (device_pos.pos0 && (n_tokens > kDecodeMaxTokens || device_pos.plan_keys < pos0 + n_tokens))
    throw std::invalid_argument("attention: a position read on the device needs a decode planned for it");
  const AttentionArgs a{q,         k_cache,  v_cache, pos0,  device_pos.pos0, n_tokens, n_head,
                        n_head_kv, head_dim, scale,   sinks, window,          out,      scratch};
  if (n_tokens > kDecodeMaxTokens) {
    const bool pairs = head_dim % 2 == 0 && aligned(k_cache, 4) && aligned(v_cache, 4);
    launchPrefill(a, pairs, stream);
    checkLaunch("attention prefill kernel");
    return;
  }

  // Planned for the keys the call may see: a plan for more keys than a step has leaves
  // its last chunks empty (no key, nothing merged).
  const int plan_pos0 = device_pos.pos0 ? device_pos.plan_keys - n_tokens : pos0;
  const DecodePlan p = decodePlan(plan_pos0, n_tokens, n_head, n_head_kv, head_dim);
  const size_t need = attentionScratchBytes(plan_pos0, n_tokens, n_head, n_head_kv, head_dim);
  if (need > 0 && (scratch == nullptr || scratch_bytes < need))
    throw std::invalid_argument("attention: scratch of " + std::to_string(scratch_bytes) + " bytes, " +
                                std::to_string(need) + " needed");
  const bool wide_loads = head_dim % 8 == 0 && aligned(k_cache, 16) && aligned(v_cache, 16);
  if (head_dim > kNarrowHeadDim && !wide_loads)
    throw std::invalid_argument("attention: head_dim " + std::to_string(head_dim) +
                                " above 256 needs a multiple of 8 and 16-byte aligned K/V");
  if (head_dim > kNarrowHeadDim)  // 32 lanes a key, 3 vectors of 8 dims each (up to 768)
    launchDecode<8, 3>(p, 32, a, stream);
  else if (wide_loads)  // 16-byte loads
    launchDecode<8, 1>(p, pow2Ceil(head_dim / 8), a, stream);
  else if (head_dim <= 32)  // 2-byte loads
    launchDecode<1, 1>(p, pow2Ceil(head_dim), a, stream);
  else if (head_dim <= 64)
    launchDecode<1, 2>(p, 32, a, stream);
  else if (head_dim <= 128)
    launchDecode<1, 4>(p, 32, a, stream);
  else
    launchDecode<1, 8>(p, 32, a, stream);
  checkLaunch("attention decode kernel");
  if (p.n_chunks > 1) {
    launchKernel(attentionMergeKernel, static_cast<unsigned>(n_tokens * n_head), kThreads, 0, stream, scratch,
                 n_tokens * n_head, p.n_chunks, head_dim, n_head, sinks, out);
    checkLaunch("attention merge kernel");
  }
}

}  // namespace moe::cuda
