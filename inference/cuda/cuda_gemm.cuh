// The int8 tensor-core GEMM's building blocks, shared by the dense matmul
// (cuda_gemm.cu) and the MoE experts (cuda_moe.cu). A block of kGemmThreads
// computes kGemmRows weight rows x kGemmTokens activation rows. For each chunk of
// 256 elements it decodes the rows' units into shared memory as signed bytes with
// their scales (loadUnitFast, cuda_quant.cuh) and copies the tokens' 8-bit activations
// beside them; then each warp multiplies its 16 rows by the tokens with mma.sync
// (cuda_mma.cuh), one unit of 32 at a time, and scales each unit's integer dot
// products into float sums by the same unitValue the matvec uses. Q6_K, Q3_K and
// Q2_K, whose two halves of a unit have their own scales, take two k16 instructions
// per unit; the others one k32.
//
// Bytes: each weight byte is read once per kGemmTokens tokens, each activation byte
// once per kGemmRows weight rows; shared memory holds one chunk of both (39 KB).
#pragma once

#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda/cuda_mma.cuh"
#include "inference/cuda/cuda_quant.cuh"

namespace moe::cuda {

inline constexpr int kGemmWarps = 4;
inline constexpr int kGemmThreads = 32 * kGemmWarps;
inline constexpr int kGemmRows = 16 * kGemmWarps;
inline constexpr int kGemmTokens = 32;  // four mma columns of 8
inline constexpr int kGemmUnits = 8;    // 256 elements: one K-quant block
// Bytes between the rows of a tile: 16 bytes of padding put the eight rows one
// fragment load touches in different shared-memory banks.
inline constexpr int kGemmTileStride = 32 * kGemmUnits + 16;

struct GemmUnitScales {
  float d, dmin;
  int sc0, sc1, m;
};

struct GemmTiles {
  alignas(16) int8_t w[kGemmRows * kGemmTileStride];
  GemmUnitScales w_scales[kGemmRows][kGemmUnits];
  alignas(16) int8_t x[kGemmTokens * kGemmTileStride];
  float x_d[kGemmTokens][kGemmUnits];
  int x_s[kGemmTokens][kGemmUnits][2];  // sums of the unit's two halves
};

__device__ __forceinline__ int ldShared32(const int8_t* p) { return *reinterpret_cast<const int*>(p); }

template <ElemType T>
__device__ __forceinline__ void loadWeightChunk(GemmTiles& tiles, const uint8_t* w, size_t row_bytes,
                                                int64_t rows, int units, int64_t row0, int unit0) {
  for (int p = threadIdx.x; p < kGemmRows * kGemmUnits; p += kGemmThreads) {
    const int r = p / kGemmUnits, ul = p % kGemmUnits;
    const int u = unit0 + ul;
    int* dst = reinterpret_cast<int*>(tiles.w + r * kGemmTileStride + 32 * ul);
    GemmUnitScales& sc = tiles.w_scales[r][ul];
    if (row0 + r < rows && u < units) {
      const Unit un = loadUnitFast<T>(w + static_cast<size_t>(row0 + r) * row_bytes, u);
#pragma unroll
      for (int i = 0; i < 8; ++i) dst[i] = un.v[i];
      sc = GemmUnitScales{un.d, un.dmin, un.sc0, un.sc1, un.m};
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) dst[i] = 0;
      sc = GemmUnitScales{0.0f, 0.0f, 0, 0, 0};
    }
  }
}

// act_rows[t]: the activation row of the tile's token t, or -1.
__device__ __forceinline__ void loadActChunk(GemmTiles& tiles, const ActRows& a, const int64_t* act_rows,
                                             int unit0) {
  for (int p = threadIdx.x; p < kGemmTokens * kGemmUnits; p += kGemmThreads) {
    const int t = p / kGemmUnits, ul = p % kGemmUnits;
    const int u = unit0 + ul;
    int* dst = reinterpret_cast<int*>(tiles.x + t * kGemmTileStride + 32 * ul);
    int s0 = 0, s1 = 0;
    float d = 0.0f;
    const int64_t row = act_rows[t];
    if (row >= 0 && u < a.units) {
      const uint8_t* src =
          reinterpret_cast<const uint8_t*>(a.q + row * a.cols + 32 * static_cast<int64_t>(u));
      const uint4 lo = ld128(src), hi = ld128(src + 16);
      reinterpret_cast<uint4*>(dst)[0] = lo;
      reinterpret_cast<uint4*>(dst)[1] = hi;
      const int words[8] = {static_cast<int>(lo.x), static_cast<int>(lo.y), static_cast<int>(lo.z),
                            static_cast<int>(lo.w), static_cast<int>(hi.x), static_cast<int>(hi.y),
                            static_cast<int>(hi.z), static_cast<int>(hi.w)};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        s0 = __dp4a(0x01010101, words[i], s0);
        s1 = __dp4a(0x01010101, words[i + 4], s1);
      }
      d = a.d[row * a.units + u];
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) dst[i] = 0;
    }
    tiles.x_d[t][ul] = d;
    tiles.x_s[t][ul][0] = s0;
    tiles.x_s[t][ul][1] = s1;
  }
}

using GemmAcc = float[kGemmTokens / 8][4];

// acc[j][i]: row g + 8 * (i / 2) of the warp's 16, token 8j + 2t + i % 2.
template <ElemType T>
__device__ __forceinline__ void multiplyChunk(const GemmTiles& tiles, GemmAcc& acc) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int r_lo = 16 * warp + g, r_hi = r_lo + 8;
  for (int ul = 0; ul < kGemmUnits; ++ul) {
    const int8_t* w_lo = tiles.w + r_lo * kGemmTileStride + 32 * ul + 4 * t;
    const int8_t* w_hi = tiles.w + r_hi * kGemmTileStride + 32 * ul + 4 * t;
    const int a[4] = {ldShared32(w_lo), ldShared32(w_hi), ldShared32(w_lo + 16), ldShared32(w_hi + 16)};
    const GemmUnitScales sc[2] = {tiles.w_scales[r_lo][ul], tiles.w_scales[r_hi][ul]};
#pragma unroll
    for (int j = 0; j < kGemmTokens / 8; ++j) {
      const int8_t* x = tiles.x + (8 * j + g) * kGemmTileStride + 32 * ul + 4 * t;
      const int b[2] = {ldShared32(x), ldShared32(x + 16)};
      int p0[4] = {0, 0, 0, 0}, p1[4] = {0, 0, 0, 0};
      if constexpr (hasHalfScales(T)) {
        const int a0[2] = {a[0], a[1]}, a1[2] = {a[2], a[3]};
        const int b0[1] = {b[0]}, b1[1] = {b[1]};
        mmaS8K16(p0, a0, b0);
        mmaS8K16(p1, a1, b1);
      } else {
        mmaS8K32(p0, a, b);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const GemmUnitScales& s = sc[i / 2];
        const int tok = 8 * j + 2 * t + i % 2;
        acc[j][i] += unitValue<T>(s.sc0, s.sc1, s.m, s.d, s.dmin, p0[i], p1[i], tiles.x_s[tok][ul][0],
                                  tiles.x_s[tok][ul][1], tiles.x_d[tok][ul]);
      }
    }
  }
}

// The products of weight rows [row0, row0 + kGemmRows) of w with the activation
// rows act_rows lists (shared memory, kGemmTokens entries), over all of a's units,
// added to acc: acc[j][i] is row 16 * warp + lane / 4 + 8 * (i / 2) of the block,
// token 8j + 2 * (lane % 4) + i % 2 of the tile. Every thread of the block calls it.
template <ElemType T>
__device__ __forceinline__ void gemmTile(GemmTiles& tiles, const uint8_t* w, size_t row_bytes, int64_t rows,
                                         int64_t row0, const ActRows& a, const int64_t* act_rows,
                                         GemmAcc& acc) {
  for (int unit0 = 0; unit0 < a.units; unit0 += kGemmUnits) {
    loadWeightChunk<T>(tiles, w, row_bytes, rows, a.units, row0, unit0);
    loadActChunk(tiles, a, act_rows, unit0);
    __syncthreads();
    multiplyChunk<T>(tiles, acc);
    __syncthreads();
  }
}

// The block-relative row and tile token of acc[j][i] for this thread.
__device__ __forceinline__ int gemmAccRow(int i) {
  return 16 * (threadIdx.x / 32) + (threadIdx.x % 32) / 4 + 8 * (i / 2);
}
__device__ __forceinline__ int gemmAccToken(int j, int i) { return 8 * j + 2 * (threadIdx.x % 4) + i % 2; }

}  // namespace moe::cuda
