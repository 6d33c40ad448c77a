// Prefill attention, for more than kDecodeMaxTokens tokens (cuda_attention.cu has the
// layout of the query rows, the decode kernels and the entry point).
//
// Tiled flash attention in float (no tensor cores, so the
// results stay float-exact up to rounding order). A block takes BQ consecutive rows
// of one kv head (BQ = 32; 16 for head_dim > 128), stages them in shared memory, and
// walks the keys 0 .. (limit of its last row) in tiles of BK (32; 16 for head_dim >
// 128) staged in shared memory as float (converted from pairs of halves, 4-byte
// loads, for an even head_dim; single halves otherwise): S = Q K^T (each thread a 4x2
// or 2x1 register block of scores), the causal mask per row, an online softmax per
// row (4 or 8 threads a row), then O += P V with each warp owning BQ/4 rows and each
// lane head dims lane + 32c in registers. Shared rows have an odd stride (head_dim |
// 1): the key rows a warp reads at once fall in different banks. The tiles with the
// latest tokens (the most keys) are launched first.
#include <math.h>

#include "inference/cuda/cuda_attention.cuh"
#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_launch.h"

namespace moe::cuda::attn {
namespace {

// Cache rows key0 .. key0 + n_keys - 1 of one kv head (`head`: its first row; rows
// kv_stride halves apart) into shared memory as float: row j at tile + j * stride.
// pairs (head_dim even, the cache 4-byte aligned): one 4-byte load per two halves.
__device__ __forceinline__ void stageTile(const __half* head, size_t kv_stride, int key0, int n_keys,
                                          int head_dim, bool pairs, int stride, float* tile) {
  if (pairs) {
    const int n_pairs = head_dim / 2;
    for (int idx = threadIdx.x; idx < n_keys * n_pairs; idx += kThreads) {
      const int j = idx / n_pairs, d = 2 * (idx % n_pairs);
      const uint32_t word =
          __ldg(reinterpret_cast<const unsigned int*>(head + static_cast<size_t>(key0 + j) * kv_stride + d));
      tile[j * stride + d] = lowHalf(word);
      tile[j * stride + d + 1] = highHalf(word);
    }
  } else {
    const auto* bits = reinterpret_cast<const unsigned short*>(head);
    for (int idx = threadIdx.x; idx < n_keys * head_dim; idx += kThreads) {
      const int j = idx / head_dim, d = idx % head_dim;
      tile[j * stride + d] =
          __half2float(__ushort_as_half(__ldg(bits + static_cast<size_t>(key0 + j) * kv_stride + d)));
    }
  }
}

// NDL: head dims per lane in O += P V (head_dim <= 32 * NDL); RW: rows per warp; BK: keys per tile.
// QS: the block's query rows staged in shared memory; false for wide heads (deepseek2's
// 576 dims), whose K/V tile alone takes most of the 48 KB: S then reads q from global
// memory (each query element once per key tile, from L1/L2).
template <int NDL, int RW, int BK, bool QS = true>
__global__ void __launch_bounds__(kThreads)
    attentionPrefillKernel(const float* __restrict__ q, const __half* __restrict__ k_cache,
                           const __half* __restrict__ v_cache, int pos0, int n_tokens, int n_head,
                           int n_head_kv, int head_dim, float scale, const float* __restrict__ sinks,
                           int window, bool pairs, float* __restrict__ out) {
  constexpr int BQ = kWarps * RW;           // rows per block
  constexpr int kStride = 32 * NDL + 1;     // shared row capacity (the odd stride used is head_dim | 1)
  constexpr int RS = BQ / 8, KS = BK / 16;  // S = Q K^T: 8 row groups x 16 key groups of threads
  constexpr int TPR = kThreads / BQ;        // softmax threads per row
  static_assert(BQ % 8 == 0 && BK % 16 == 0 && 32 % TPR == 0 && BK % TPR == 0, "tile shape");
  __shared__ float q_s[QS ? BQ * kStride : 1];
  __shared__ float kv_s[BK * kStride];  // the K tile, then the V tile
  __shared__ float p_s[BQ][BK];         // scores, then probabilities
  __shared__ float corr_s[BQ], l_s[BQ], m_s[BQ];

  const int group = n_head / n_head_kv;
  const int n_rows = n_tokens * group;
  const int row0 = (gridDim.x - 1 - blockIdx.x) * BQ;  // the latest rows (most keys) first
  const int kvh = blockIdx.y;
  const int stride = head_dim | 1;
  const size_t kv_stride = static_cast<size_t>(n_head_kv) * head_dim;
  const __half* k_head = k_cache + static_cast<size_t>(kvh) * head_dim;
  const __half* v_head = v_cache + static_cast<size_t>(kvh) * head_dim;
  const int n_keys = pos0 + (imin(row0 + BQ, n_rows) - 1) / group + 1;  // keys of the block's last row
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  auto rowItem = [&](int row) {  // index of row's query in q and out
    return static_cast<size_t>(row / group) * n_head + kvh * group + row % group;
  };
  auto rowLimit = [&](int row) { return row < n_rows ? pos0 + row / group : -1; };
  auto rowFirst = [&](int row) { return window > 0 ? pos0 + row / group - window + 1 : 0; };

  if (QS)
    for (int idx = threadIdx.x; idx < BQ * head_dim; idx += kThreads) {
      const int r = idx / head_dim, d = idx % head_dim;
      const int row = row0 + r;
      q_s[r * stride + d] = row < n_rows ? __ldg(q + rowItem(row) * head_dim + d) : 0.0f;
    }

  const int kg = threadIdx.x % 16, rg = threadIdx.x / 16;  // S: keys kg + 16j, rows rg + 8i
  const float* q_row[RS];                                  // !QS: row rg + 8i's query, or null past n_rows
  int s_limit[RS], s_first[RS];
#pragma unroll
  for (int i = 0; i < RS; ++i) {
    const int row = row0 + rg + 8 * i;
    s_limit[i] = rowLimit(row), s_first[i] = rowFirst(row);
    q_row[i] = row < n_rows ? q + rowItem(row) * head_dim : nullptr;
  }
  const int sm_row = threadIdx.x / TPR, sm_part = threadIdx.x % TPR;  // softmax: row, key offset
  float m_run = -INFINITY, l_run = 0.0f;
  float acc[RW][NDL];
#pragma unroll
  for (int i = 0; i < RW; ++i)
#pragma unroll
    for (int c = 0; c < NDL; ++c) acc[i][c] = 0.0f;

  // A sliding window hides the keys before the first row's window from the whole block.
  const int window_begin = rowFirst(row0);
  for (int key0 = window_begin > 0 ? window_begin : 0; key0 < n_keys; key0 += BK) {
    const int tile_keys = imin(BK, n_keys - key0);
    stageTile(k_head, kv_stride, key0, tile_keys, head_dim, pairs, stride, kv_s);
    __syncthreads();  // K tile (and, the first time, Q) staged

    float dot[RS][KS];
#pragma unroll
    for (int i = 0; i < RS; ++i)
#pragma unroll
      for (int j = 0; j < KS; ++j) dot[i][j] = 0.0f;
#pragma unroll 4
    for (int d = 0; d < head_dim; ++d) {
      float qv[RS], kv[KS];
#pragma unroll
      for (int i = 0; i < RS; ++i)
        qv[i] = QS ? q_s[(rg + 8 * i) * stride + d] : (q_row[i] ? __ldg(q_row[i] + d) : 0.0f);
#pragma unroll
      for (int j = 0; j < KS; ++j) kv[j] = kv_s[(kg + 16 * j) * stride + d];
#pragma unroll
      for (int i = 0; i < RS; ++i)
#pragma unroll
        for (int j = 0; j < KS; ++j) dot[i][j] += qv[i] * kv[j];
    }
#pragma unroll
    for (int i = 0; i < RS; ++i)
#pragma unroll
      for (int j = 0; j < KS; ++j)  // keys past the tile are past every row's limit
        p_s[rg + 8 * i][kg + 16 * j] = key0 + kg + 16 * j <= s_limit[i] && key0 + kg + 16 * j >= s_first[i]
                                           ? dot[i][j] * scale
                                           : -INFINITY;
    __syncthreads();  // scores written, K tile no longer read

    float m_tile = -INFINITY;
    for (int j = sm_part; j < BK; j += TPR) m_tile = fmaxf(m_tile, p_s[sm_row][j]);
    for (int o = TPR / 2; o > 0; o /= 2) m_tile = fmaxf(m_tile, __shfl_xor_sync(kFull, m_tile, o));
    const float m_new = fmaxf(m_run, m_tile);
    float correction = 1.0f, sum = 0.0f;
    for (int j = sm_part; j < BK; j += TPR) {
      const float p = m_new == -INFINITY ? 0.0f : expf(p_s[sm_row][j] - m_new);  // 0 if masked
      p_s[sm_row][j] = p;
      sum += p;
    }
    for (int o = TPR / 2; o > 0; o /= 2) sum += __shfl_xor_sync(kFull, sum, o);
    if (m_new != -INFINITY) correction = expf(m_run - m_new);
    l_run = l_run * correction + sum;
    m_run = m_new;
    if (sm_part == 0) corr_s[sm_row] = correction, l_s[sm_row] = l_run, m_s[sm_row] = m_run;
    stageTile(v_head, kv_stride, key0, tile_keys, head_dim, pairs, stride, kv_s);
    __syncthreads();  // probabilities, corrections and the V tile ready

#pragma unroll
    for (int i = 0; i < RW; ++i) {
      const float corr = corr_s[warp * RW + i];
#pragma unroll
      for (int c = 0; c < NDL; ++c) acc[i][c] *= corr;
    }
    for (int j = 0; j < tile_keys; ++j) {
      float vv[NDL];
#pragma unroll
      for (int c = 0; c < NDL; ++c) {
        const int d = lane + 32 * c;
        vv[c] = d < head_dim ? kv_s[j * stride + d] : 0.0f;
      }
#pragma unroll
      for (int i = 0; i < RW; ++i) {
        const float p = p_s[warp * RW + i][j];
#pragma unroll
        for (int c = 0; c < NDL; ++c) acc[i][c] += p * vv[c];
      }
    }
    __syncthreads();  // V tile and probabilities read before the next tile overwrites them
  }

#pragma unroll
  for (int i = 0; i < RW; ++i) {
    const int row = row0 + warp * RW + i;
    if (row >= n_rows) continue;
    float l_all = l_s[warp * RW + i];  // >= 1: the row's own key is in its range
    float* o = out + rowItem(row) * head_dim;
#pragma unroll
    for (int c = 0; c < NDL; ++c) {
      const int d = lane + 32 * c;
      float l = l_all, v = acc[i][c];
      if (sinks) withSink(sinks[rowItem(row) % n_head], m_s[warp * RW + i], l, v);
      if (d < head_dim) o[d] = v / l;
    }
  }
}

template <int NDL, int RW, int BK, bool QS = true>
void launchPrefillTiles(const AttentionArgs& a, bool pairs, cudaStream_t stream) {
  constexpr int BQ = kWarps * RW;
  const int64_t n_rows = static_cast<int64_t>(a.n_tokens) * (a.n_head / a.n_head_kv);
  const dim3 grid(static_cast<unsigned>((n_rows + BQ - 1) / BQ), static_cast<unsigned>(a.n_head_kv));
  launchKernel(attentionPrefillKernel<NDL, RW, BK, QS>, grid, kThreads, 0, stream, a.q, a.k, a.v, a.pos0,
               a.n_tokens, a.n_head, a.n_head_kv, a.head_dim, a.scale, a.sinks, a.window, pairs, a.out);
}

}  // namespace

void launchPrefill(const AttentionArgs& a, bool pairs, cudaStream_t stream) {
  if (a.head_dim <= 32)
    launchPrefillTiles<1, 8, 32>(a, pairs, stream);
  else if (a.head_dim <= 64)
    launchPrefillTiles<2, 8, 32>(a, pairs, stream);
  else if (a.head_dim <= 128)
    launchPrefillTiles<4, 8, 32>(a, pairs, stream);
  else if (a.head_dim <= kNarrowHeadDim)
    launchPrefillTiles<8, 4, 16>(a, pairs, stream);
  else
    launchPrefillTiles<kMaxHeadDim / 32, 2, 16, false>(a, pairs, stream);
}

}  // namespace moe::cuda::attn
