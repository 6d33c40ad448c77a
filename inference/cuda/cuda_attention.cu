// Causal grouped-query attention over the device KV cache (Backend::attention):
// q, out: [n_tokens][n_head][head_dim]; k_cache, v_cache: [n_ctx][n_head_kv][head_dim];
// query (t, h) attends to cache rows 0 .. pos0 + t of kv head h / (n_head / n_head_kv).
//
// Rows. For one kv head the query rows are the pairs (t, g), t < n_tokens, g < group
// (group = n_head / n_head_kv), numbered r = t * group + g: the group's heads of one
// token are neighbours, so a block of rows shares one kv head and spans few tokens.
// Row r sees keys 0 .. pos0 + r / group (its causal limit).
//
// Decode (n_tokens <= kDecodeMaxTokens): flash-decoding. The keys 0 .. pos0+n_tokens-1
// are cut into n_chunks chunks of chunk_keys; grid = (chunk, kv head x row block), a
// row block being up to R rows (R = 8, 4 for head_dim > 128) of one kv head, so for
// one token and group <= R each K/V row is read by exactly one block. In a block of 4
// warps, warps take keys and lanes take head dims: a key is handled by lanes_per_key
// lanes (32, or fewer for a small head_dim, so a warp then takes several keys at
// once), each holding NV vectors of VEC (4: float4 loads when head_dim % 4 == 0 and
// the pointers are 16-byte aligned; else 1) dims, and each lane loads 2 keys per step
// (1 when it holds 8 dims), their K and V vectors in flight together. Per key the R
// dot products are summed over the key's lanes by xor shuffles; each warp keeps per
// row an online softmax (max m, sum l, weighted V sum acc), rescaled once per step
// (every row of the block uses the same K/V vectors). The warps' states merge in
// shared memory (scale exp(m_w - m_max)); with one chunk the block writes
// out = acc / l, else it writes its (m, l, acc) to the scratch partials and
// attentionMergeKernel (a block per query row) combines the chunks the same way.
// Chunks: enough for ~kTargetBlocks blocks, none shorter than kMinChunkKeys keys
// (a 4,096-key context with 8 kv heads: 32 chunks of 128 keys, 256 blocks; a context
// of <= 64 keys: one chunk, no merge kernel).
//
// Prefill (more tokens): tiled flash attention in float (no tensor cores, so the
// results stay float-exact up to rounding order). A block takes BQ consecutive rows
// of one kv head (BQ = 32; 16 for head_dim > 128), stages them in shared memory, and
// walks the keys 0 .. (limit of its last row) in tiles of BK (32; 16 for head_dim >
// 128) staged in shared memory: S = Q K^T (each thread a 4x2 or 2x1 register block
// of scores), the causal mask per row, an online softmax per row (4 or 8 threads a
// row), then O += P V with each warp owning BQ/4 rows and each lane head dims
// lane + 32c in registers. Shared rows have an odd stride (head_dim | 1): the key
// rows a warp reads at once fall in different banks (so tiles are staged by coalesced
// scalar loads; float4 stores would need a stride of a multiple of 4). The tiles with
// the latest tokens (the most keys) are launched first.
//
// Bytes read, against the minimum (every K and V row of the context once per kv
// head: 2 * n_keys * kv_width * 4 bytes, kv_width = n_head_kv * head_dim):
//   decode   the minimum x row blocks per kv head (1 for one token and group <= R),
//            plus the partials written and read: 2 * n_tokens * n_head * n_chunks *
//            (head_dim + 2) * 4 (4,096 keys, 8 kv heads, group 4, head_dim 128: 33.6 MB
//            of K/V and 1.1 MB of partials);
//   prefill  per kv head, each BQ-row tile reads the K/V rows up to its last row's
//            limit: about ceil(n_tokens * group / BQ) x the minimum times the causal
//            share (~half for pos0 = 0), BQ x less than one pass per query row.
// Mathematically the CPU backend's softmax; only the float rounding order differs.
#include <math.h>

#include <stdexcept>
#include <string>

#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda/cuda_launch.h"

namespace moe::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

int pow2Ceil(int n) {
  int p = 1;
  while (p < n) p *= 2;
  return p;
}

// ---------------------------------------------------------------------------
// Decode: flash-decoding

constexpr int kDecodeMaxTokens = 4;
constexpr int kMinChunkKeys = 64;   // no chunk shorter (the merge costs a partial per row)
constexpr int kTargetBlocks = 256;  // ~2 blocks per SM on a 132-SM GPU
constexpr int kMaxChunks = 256;     // the merge kernel's shared weights
constexpr int kMaxDecodeRows = 8;   // rows per block; 4 when head_dim > 128 (registers)

// Keys a lane loads per step: 2 (4 vectors in flight), 1 where a lane holds 8 dims
// of a row (already 4 float4 loads of K and V; 2 keys would spill registers).
__host__ __device__ constexpr int keysPerLane(int dims_per_lane) { return dims_per_lane >= 8 ? 1 : 2; }

int decodeRowsPerBlock(int head_dim, int n_rows) {
  const int cap = head_dim > 128 ? kMaxDecodeRows / 2 : kMaxDecodeRows;
  const int r = pow2Ceil(n_rows);
  return r < cap ? r : cap;
}

// A lane's NV vectors of VEC dims of one row: vector c holds dims (c * lanes_per_key +
// sub) * VEC .. + VEC - 1; dims at or past head_dim read as 0.
template <int VEC, int NV>
__device__ __forceinline__ void loadLaneDims(const float* row, int sub, int lanes_per_key, int head_dim,
                                             float (&x)[VEC * NV]) {
#pragma unroll
  for (int c = 0; c < NV; ++c) {
    const int d = (c * lanes_per_key + sub) * VEC;
    if constexpr (VEC == 4) {
      float4 f = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (d < head_dim) f = __ldg(reinterpret_cast<const float4*>(row + d));  // head_dim % 4 == 0
      x[4 * c] = f.x, x[4 * c + 1] = f.y, x[4 * c + 2] = f.z, x[4 * c + 3] = f.w;
    } else {
      x[c] = d < head_dim ? __ldg(row + d) : 0.0f;
    }
  }
}

// grid (n_chunks, n_head_kv * row_blocks), kThreads threads. partial (n_chunks > 1):
// m [items][n_chunks], l [items][n_chunks], acc [items][n_chunks][head_dim], items =
// n_tokens * n_head. (Launch bounds of 2 blocks per SM still allow 255 registers; without
// them ptxas 13 gives one instance an 8-byte stack frame.)
template <int VEC, int NV, int R>
__global__ void __launch_bounds__(kThreads, 2)
    attentionDecodeKernel(const float* __restrict__ q, const float* __restrict__ k_cache,
                          const float* __restrict__ v_cache, int pos0, int n_tokens, int n_head,
                          int n_head_kv, int head_dim, float scale, int lanes_per_key, int chunk_keys,
                          float* __restrict__ out, float* __restrict__ partial) {
  constexpr int D = VEC * NV;  // dims per lane
  constexpr int KT = keysPerLane(D);
  __shared__ float sm_m[kWarps][R], sm_l[kWarps][R];
  __shared__ float sm_acc[kWarps][R][32 * D];

  const int group = n_head / n_head_kv;
  const int n_rows = n_tokens * group;
  const int row_blocks = (n_rows + R - 1) / R;
  const int kvh = blockIdx.y / row_blocks;
  const int row0 = (blockIdx.y % row_blocks) * R;
  const int chunk = blockIdx.x, n_chunks = gridDim.x;
  const int key_begin = chunk * chunk_keys;
  const int key_end = imin(pos0 + n_tokens, key_begin + chunk_keys);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int lpk = lanes_per_key, slots = 32 / lpk;  // a warp takes `slots` keys at once
  const int slot = lane / lpk, sub = lane % lpk;
  const size_t kv_stride = static_cast<size_t>(n_head_kv) * head_dim;
  const float* k_head = k_cache + static_cast<size_t>(kvh) * head_dim;
  const float* v_head = v_cache + static_cast<size_t>(kvh) * head_dim;

  float qr[R][D], acc[R][D], m[R], l[R];
  int limit[R];  // last key row r sees; -1 past n_rows
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int row = row0 + r;
    limit[r] = -1;
#pragma unroll
    for (int i = 0; i < D; ++i) qr[r][i] = 0.0f, acc[r][i] = 0.0f;
    if (row < n_rows) {
      const int t = row / group, h = kvh * group + row % group;
      limit[r] = pos0 + t;
      loadLaneDims<VEC, NV>(q + (static_cast<size_t>(t) * n_head + h) * head_dim, sub, lpk, head_dim, qr[r]);
    }
    m[r] = -INFINITY, l[r] = 0.0f;
  }

  // Warp-uniform trip count: every shuffle below has all 32 lanes.
  for (int base = key_begin + warp * KT * slots; base < key_end; base += kWarps * KT * slots) {
    float kx[KT][D], vx[KT][D];
    int key[KT];
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
      key[kt] = base + kt * slots + slot;
      if (key[kt] < key_end) {
        const size_t off = static_cast<size_t>(key[kt]) * kv_stride;
        loadLaneDims<VEC, NV>(k_head + off, sub, lpk, head_dim, kx[kt]);
        loadLaneDims<VEC, NV>(v_head + off, sub, lpk, head_dim, vx[kt]);
      } else {
#pragma unroll
        for (int i = 0; i < D; ++i) kx[kt][i] = 0.0f, vx[kt][i] = 0.0f;
      }
    }
    float s[KT][R];
#pragma unroll
    for (int kt = 0; kt < KT; ++kt)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < D; ++i) dot += qr[r][i] * kx[kt][i];
#pragma unroll
        for (int o = 16; o > 0; o /= 2)  // over the key's lanes
          if (o < lpk) dot += __shfl_xor_sync(kFull, dot, o);
        s[kt][r] = key[kt] < key_end && key[kt] <= limit[r] ? dot * scale : -INFINITY;
      }
    float m_step[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float mx = s[0][r];
#pragma unroll
      for (int kt = 1; kt < KT; ++kt) mx = fmaxf(mx, s[kt][r]);
#pragma unroll
      for (int o = 16; o > 0; o /= 2)  // over the slots
        if (o >= lpk) mx = fmaxf(mx, __shfl_xor_sync(kFull, mx, o));
      m_step[r] = mx;
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const float m_new = fmaxf(m[r], m_step[r]);
      const float m_ref = m_new == -INFINITY ? 0.0f : m_new;  // no key of this row yet: all terms 0
      const float correction = expf(m[r] - m_ref);            // 0 while m = -inf
      l[r] *= correction;
#pragma unroll
      for (int i = 0; i < D; ++i) acc[r][i] *= correction;
#pragma unroll
      for (int kt = 0; kt < KT; ++kt) {
        const float p = expf(s[kt][r] - m_ref);  // 0 for a masked key
        l[r] += p;
#pragma unroll
        for (int i = 0; i < D; ++i) acc[r][i] += p * vx[kt][i];
      }
      m[r] = m_new;
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
    if (n_chunks == 1) {
      out[item * head_dim + d] = o / l_all;  // l_all >= 1: key 0 is in the chunk
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
                         float* __restrict__ out) {
  __shared__ float weight[kMaxChunks];
  const size_t item = blockIdx.x;
  const float* pm = partial + item * n_chunks;
  const float* pl = partial + static_cast<size_t>(n_items) * n_chunks + item * n_chunks;
  const float* pacc = partial + 2 * static_cast<size_t>(n_items) * n_chunks + item * n_chunks * head_dim;
  float m_max = -INFINITY;
  for (int c = 0; c < n_chunks; ++c) m_max = fmaxf(m_max, pm[c]);  // finite: chunk 0 holds key 0
  for (int c = threadIdx.x; c < n_chunks; c += kThreads)
    weight[c] = pm[c] == -INFINITY ? 0.0f : expf(pm[c] - m_max);
  __syncthreads();
  float l_all = 0.0f;
  for (int c = 0; c < n_chunks; ++c) l_all += pl[c] * weight[c];
  for (int d = threadIdx.x; d < head_dim; d += kThreads) {
    float o = 0.0f;
    for (int c = 0; c < n_chunks; ++c) o += pacc[static_cast<size_t>(c) * head_dim + d] * weight[c];
    out[item * head_dim + d] = o / l_all;
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
  p.rows_per_block = decodeRowsPerBlock(head_dim, n_rows);
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
void launchDecodeRows(const DecodePlan& p, int lanes_per_key, const float* q, const float* k, const float* v,
                      int pos0, int n_tokens, int n_head, int n_head_kv, int head_dim, float scale,
                      float* out, float* partial, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.n_chunks), static_cast<unsigned>(n_head_kv * p.row_blocks));
  launchKernel(attentionDecodeKernel<VEC, NV, R>, grid, kThreads, 0, stream, q, k, v, pos0, n_tokens, n_head,
               n_head_kv, head_dim, scale, lanes_per_key, p.chunk_keys, out, partial);
}

template <int VEC, int NV>
void launchDecode(const DecodePlan& p, int lanes_per_key, const float* q, const float* k, const float* v,
                  int pos0, int n_tokens, int n_head, int n_head_kv, int head_dim, float scale, float* out,
                  float* partial, cudaStream_t stream) {
  switch (p.rows_per_block) {
    case 1:
      return launchDecodeRows<VEC, NV, 1>(p, lanes_per_key, q, k, v, pos0, n_tokens, n_head, n_head_kv,
                                          head_dim, scale, out, partial, stream);
    case 2:
      return launchDecodeRows<VEC, NV, 2>(p, lanes_per_key, q, k, v, pos0, n_tokens, n_head, n_head_kv,
                                          head_dim, scale, out, partial, stream);
    case 4:
      return launchDecodeRows<VEC, NV, 4>(p, lanes_per_key, q, k, v, pos0, n_tokens, n_head, n_head_kv,
                                          head_dim, scale, out, partial, stream);
    default:
      if constexpr (VEC * NV < 8)  // 8 rows only where a lane holds <= 4 dims (decodeRowsPerBlock)
        return launchDecodeRows<VEC, NV, 8>(p, lanes_per_key, q, k, v, pos0, n_tokens, n_head, n_head_kv,
                                            head_dim, scale, out, partial, stream);
      throw std::logic_error("attention: no decode kernel for " + std::to_string(p.rows_per_block) + " rows");
  }
}

// ---------------------------------------------------------------------------
// Prefill: tiled flash attention

// NDL: head dims per lane in O += P V (head_dim <= 32 * NDL); RW: rows per warp; BK: keys per tile.
template <int NDL, int RW, int BK>
__global__ void __launch_bounds__(kThreads)
    attentionPrefillKernel(const float* __restrict__ q, const float* __restrict__ k_cache,
                           const float* __restrict__ v_cache, int pos0, int n_tokens, int n_head,
                           int n_head_kv, int head_dim, float scale, float* __restrict__ out) {
  constexpr int BQ = kWarps * RW;           // rows per block
  constexpr int kStride = 32 * NDL + 1;     // shared row capacity (the odd stride used is head_dim | 1)
  constexpr int RS = BQ / 8, KS = BK / 16;  // S = Q K^T: 8 row groups x 16 key groups of threads
  constexpr int TPR = kThreads / BQ;        // softmax threads per row
  static_assert(BQ % 8 == 0 && BK % 16 == 0 && 32 % TPR == 0 && BK % TPR == 0, "tile shape");
  __shared__ float q_s[BQ * kStride];
  __shared__ float kv_s[BK * kStride];  // the K tile, then the V tile
  __shared__ float p_s[BQ][BK];         // scores, then probabilities
  __shared__ float corr_s[BQ], l_s[BQ];

  const int group = n_head / n_head_kv;
  const int n_rows = n_tokens * group;
  const int row0 = (gridDim.x - 1 - blockIdx.x) * BQ;  // the latest rows (most keys) first
  const int kvh = blockIdx.y;
  const int stride = head_dim | 1;
  const size_t kv_stride = static_cast<size_t>(n_head_kv) * head_dim;
  const float* k_head = k_cache + static_cast<size_t>(kvh) * head_dim;
  const float* v_head = v_cache + static_cast<size_t>(kvh) * head_dim;
  const int n_keys = pos0 + (imin(row0 + BQ, n_rows) - 1) / group + 1;  // keys of the block's last row
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  auto rowItem = [&](int row) {  // index of row's query in q and out
    return static_cast<size_t>(row / group) * n_head + kvh * group + row % group;
  };
  auto rowLimit = [&](int row) { return row < n_rows ? pos0 + row / group : -1; };

  for (int idx = threadIdx.x; idx < BQ * head_dim; idx += kThreads) {
    const int r = idx / head_dim, d = idx % head_dim;
    const int row = row0 + r;
    q_s[r * stride + d] = row < n_rows ? __ldg(q + rowItem(row) * head_dim + d) : 0.0f;
  }

  const int kg = threadIdx.x % 16, rg = threadIdx.x / 16;  // S: keys kg + 16j, rows rg + 8i
  int s_limit[RS];
#pragma unroll
  for (int i = 0; i < RS; ++i) s_limit[i] = rowLimit(row0 + rg + 8 * i);
  const int sm_row = threadIdx.x / TPR, sm_part = threadIdx.x % TPR;  // softmax: row, key offset
  float m_run = -INFINITY, l_run = 0.0f;
  float acc[RW][NDL];
#pragma unroll
  for (int i = 0; i < RW; ++i)
#pragma unroll
    for (int c = 0; c < NDL; ++c) acc[i][c] = 0.0f;

  for (int key0 = 0; key0 < n_keys; key0 += BK) {
    const int tile_keys = imin(BK, n_keys - key0);
    for (int idx = threadIdx.x; idx < tile_keys * head_dim; idx += kThreads) {
      const int j = idx / head_dim, d = idx % head_dim;
      kv_s[j * stride + d] = __ldg(k_head + static_cast<size_t>(key0 + j) * kv_stride + d);
    }
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
      for (int i = 0; i < RS; ++i) qv[i] = q_s[(rg + 8 * i) * stride + d];
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
        p_s[rg + 8 * i][kg + 16 * j] = key0 + kg + 16 * j <= s_limit[i] ? dot[i][j] * scale : -INFINITY;
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
    if (sm_part == 0) corr_s[sm_row] = correction, l_s[sm_row] = l_run;
    for (int idx = threadIdx.x; idx < tile_keys * head_dim; idx += kThreads) {
      const int j = idx / head_dim, d = idx % head_dim;
      kv_s[j * stride + d] = __ldg(v_head + static_cast<size_t>(key0 + j) * kv_stride + d);
    }
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
    const float l_all = l_s[warp * RW + i];  // >= 1: key 0 is in every row's range
    float* o = out + rowItem(row) * head_dim;
#pragma unroll
    for (int c = 0; c < NDL; ++c) {
      const int d = lane + 32 * c;
      if (d < head_dim) o[d] = acc[i][c] / l_all;
    }
  }
}

template <int NDL, int RW, int BK>
void launchPrefill(const float* q, const float* k, const float* v, int pos0, int n_tokens, int n_head,
                   int n_head_kv, int head_dim, float scale, float* out, cudaStream_t stream) {
  constexpr int BQ = kWarps * RW;
  const int64_t n_rows = static_cast<int64_t>(n_tokens) * (n_head / n_head_kv);
  const dim3 grid(static_cast<unsigned>((n_rows + BQ - 1) / BQ), static_cast<unsigned>(n_head_kv));
  launchKernel(attentionPrefillKernel<NDL, RW, BK>, grid, kThreads, 0, stream, q, k, v, pos0, n_tokens,
               n_head, n_head_kv, head_dim, scale, out);
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

size_t attentionScratchBytes(int pos0, int n_tokens, int n_head, int n_head_kv, int head_dim) {
  if (n_tokens <= 0 || n_tokens > kDecodeMaxTokens || n_head <= 0 || n_head_kv <= 0 || head_dim <= 0)
    return 0;
  const DecodePlan p = decodePlan(pos0, n_tokens, n_head, n_head_kv, head_dim);
  if (p.n_chunks == 1) return 0;
  return static_cast<size_t>(n_tokens) * n_head * p.n_chunks * (head_dim + 2) * sizeof(float);
}

void launchAttention(const float* q, const float* k_cache, const float* v_cache, int pos0, int n_tokens,
                     int n_head, int n_head_kv, int head_dim, float scale, float* out, float* scratch,
                     size_t scratch_bytes, cudaStream_t stream) {
  if (n_tokens <= 0) return;
  if (n_head <= 0 || n_head_kv <= 0 || n_head % n_head_kv != 0 || head_dim <= 0 || head_dim > kMaxHeadDim ||
      pos0 < 0)
    throw std::invalid_argument("attention: bad shape");
  if (n_tokens > kDecodeMaxTokens) {
    if (head_dim <= 32)
      launchPrefill<1, 8, 32>(q, k_cache, v_cache, pos0, n_tokens, n_head, n_head_kv, head_dim, scale, out,
                              stream);
    else if (head_dim <= 64)
      launchPrefill<2, 8, 32>(q, k_cache, v_cache, pos0, n_tokens, n_head, n_head_kv, head_dim, scale, out,
                              stream);
    else if (head_dim <= 128)
      launchPrefill<4, 8, 32>(q, k_cache, v_cache, pos0, n_tokens, n_head, n_head_kv, head_dim, scale, out,
                              stream);
    else
      launchPrefill<8, 4, 16>(q, k_cache, v_cache, pos0, n_tokens, n_head, n_head_kv, head_dim, scale, out,
                              stream);
    checkLaunch("attention prefill kernel");
    return;
  }

  const DecodePlan p = decodePlan(pos0, n_tokens, n_head, n_head_kv, head_dim);
  const size_t need = attentionScratchBytes(pos0, n_tokens, n_head, n_head_kv, head_dim);
  if (need > 0 && (scratch == nullptr || scratch_bytes < need))
    throw std::invalid_argument("attention: scratch of " + std::to_string(scratch_bytes) + " bytes, " +
                                std::to_string(need) + " needed");
  const bool vec4 = head_dim % 4 == 0 && aligned16(q) && aligned16(k_cache) && aligned16(v_cache);
  if (vec4 && head_dim <= 128)
    launchDecode<4, 1>(p, pow2Ceil(head_dim / 4), q, k_cache, v_cache, pos0, n_tokens, n_head, n_head_kv,
                       head_dim, scale, out, scratch, stream);
  else if (vec4)
    launchDecode<4, 2>(p, 32, q, k_cache, v_cache, pos0, n_tokens, n_head, n_head_kv, head_dim, scale, out,
                       scratch, stream);
  else if (head_dim <= 32)
    launchDecode<1, 1>(p, pow2Ceil(head_dim), q, k_cache, v_cache, pos0, n_tokens, n_head, n_head_kv,
                       head_dim, scale, out, scratch, stream);
  else if (head_dim <= 64)
    launchDecode<1, 2>(p, 32, q, k_cache, v_cache, pos0, n_tokens, n_head, n_head_kv, head_dim, scale, out,
                       scratch, stream);
  else if (head_dim <= 128)
    launchDecode<1, 4>(p, 32, q, k_cache, v_cache, pos0, n_tokens, n_head, n_head_kv, head_dim, scale, out,
                       scratch, stream);
  else
    launchDecode<1, 8>(p, 32, q, k_cache, v_cache, pos0, n_tokens, n_head, n_head_kv, head_dim, scale, out,
                       scratch, stream);
  checkLaunch("attention decode kernel");
  if (p.n_chunks > 1) {
    launchKernel(attentionMergeKernel, static_cast<unsigned>(n_tokens * n_head), kThreads, 0, stream, scratch,
                 n_tokens * n_head, p.n_chunks, head_dim, out);
    checkLaunch("attention merge kernel");
  }
}

}  // namespace moe::cuda
