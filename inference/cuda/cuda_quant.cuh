// Device-side arithmetic of quantised weight rows against 8-bit activations, shared
// by the dense matvec (cuda_matvec.cu) and the MoE expert kernels (cuda_moe.cu).
//
// A row is read in units of 32 elements: a Q8_0 / Q4_0 block, or one sub-block of
// a K-quant block (eight per 256). A unit decodes to eight 32-bit words of signed
// or unsigned bytes (element 4i..4i+3 in word i), dotted with the activation's
// bytes by dp4a, and its integer total is scaled once:
//   Q8_0       P = sum w*x                                   r = float(P) * (d*dx)
//   Q4_0       P = sum nib*x - 8*sum x                       r = float(P) * (d*dx)
//   Q4_K/Q5_K  P = sc * sum q*x,  M = m * sum x              r = float(P)*(d*dx) - float(M)*(dmin*dx)
//   Q6_K       P = sc0 * (sum q*x - 32 sum x)[0..16) + sc1 * (...)[16..32)
//                                                            r = float(P) * (d*dx)
//   Q3_K       as Q6_K with q - 4 (q = 2 low bits | high bit << 2), sc = 6-bit scale - 32
//   Q2_K       P = sc0 * sum q*x [0..16) + sc1 * [16..32), M = m0 * sum x [0..16) + m1 * [16..32)
//                                                            r = float(P)*(d*dx) - float(M)*(dmin*dx)
//   Q4_1/Q5_1  P = sum q*x, S = sum x                        r = float(P)*(d*dx) + float(S)*(m*dx)
//   Q5_0       P = sum q*x - 16*sum x                        r = float(P) * (d*dx)
//   IQ4_NL, MXFP4, IQ4_XS: the unit's bytes are the table values of its nibbles,
//              P = sc * sum v*x                              r = float(P) * (d*dx)
//              (IQ4_XS: sc = 6-bit scale - 32; MXFP4: d = 2^(e-128) on doubled values)
//   IQ1_*, IQ2_*, IQ3_*: the unit's bytes are signed grid values (cuda_grids.cuh),
//              P = sc0 * sum v*x [0..16) + sc1 * [16..32)    r = float(P) * (d*dx)
// The products inside P are exact integers, so a unit's value differs from the CPU
// backend's (quant/quant_dot.h) only in how the float terms of a row are summed.
//
// Activations (quantised once per matmul by quantizeActsKernel) are laid out per
// row as int8 q[cols], and per unit a float scale dx and the int sum of its q: Q8_0
// blocks of 32 for Q8_0 / Q4_0 weights (dx = f16(amax/127)), Q8_K blocks of 256 for
// the K-quants (dx = 1/(-127/x_max), repeated for the block's eight units), the
// same bytes quant/quant_dot.cpp's quantisers write.
//
// Block layouts (quant/quant_decode.cpp, quant/quant_layout.h): Q8_0 34 bytes
// {f16 d; int8 q[32]}; Q4_0 18 bytes {f16 d; u8 qs[16]}; Q4_1 20 {d, m, qs[16]}; Q5_0
// 22 {d, u32 qh, qs[16]}; Q5_1 24 {d, m, qh, qs[16]}; IQ4_NL 18 {d, qs[16]}; MXFP4 17
// {u8 e, qs[16]}; Q2_K 84 {scales[16], qs[64], d, dmin}; Q3_K 110 {hmask[32], qs[64],
// scales[12], d}; Q4_K 144 {f16 d, dmin; u8 scales[12]; u8 qs[128]}; Q5_K 176 {d, dmin,
// scales[12], qh[32], qs[128]}; Q6_K 210 {ql[128], qh[64], int8 sc[16], f16 d}; IQ4_XS
// 136 {d, u16 scales_h, scales_l[4], qs[128]}.
// Most layouts are only 2-byte aligned within a row (MXFP4's 1-byte), so a run of
// words is read with aligned 4-byte loads joined by funnel shifts (loadRun). Q4_K
// and Q5_K blocks are multiples of 16 bytes: in a row that starts on a 16-byte
// boundary (as the slabs and uploads place them) a unit is read with 16-byte loads
// (loadUnitWide), an eighth of the load instructions, the same bytes. Activation rows start on a 32-byte
// boundary (actRows checks): the GEMM's tile loader reads them 16 bytes at a time. The matvec reads them as
// words: wider loads there cost 30-60 more registers in downKernel (ptxas, sm_90) for bytes that come from
// L1.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "inference/cuda/cuda_grids.cuh"
#include "inference/cuda/cuda_kernels.h"

namespace moe::cuda {

// Activations of n rows, as described above. f: the float rows, for F32/F16/BF16
// weights (dotted in float).
struct ActRows {
  const int8_t* q = nullptr;  // [n][cols]
  const float* d = nullptr;   // [n][units]
  const int* s = nullptr;     // [n][units]
  const float* f = nullptr;   // [n][cols]
  int64_t cols = 0;
  int units = 0;  // cols / 32
};

__device__ __forceinline__ uint32_t ld16(const uint8_t* p) {
  return static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(p));
}
__device__ __forceinline__ float f16At(const uint8_t* p) { return __half2float(__ushort_as_half(ld16(p))); }

// The bytes of the aligned word at q that loadRun's last word needs: the first
// `lead` (0..3) of them, read as they are (kAlign 2: lead is 0 or 2, one 16-bit
// load), so nothing past the run is read.
template <int kAlign>
__device__ __forceinline__ uint32_t runTail(const uint8_t* q, unsigned lead) {
  if constexpr (kAlign == 2) {
    return lead ? ld16(q) : 0u;
  } else {
    uint32_t t = 0;
#pragma unroll
    for (unsigned k = 0; k < 3; ++k)
      if (k < lead) t |= static_cast<uint32_t>(q[k]) << (8 * k);
    return t;
  }
}

// N consecutive little-endian words from p, which is kAlign-byte aligned (the
// layouts' blocks are 2- or 1-byte aligned in a row): N aligned 4-byte loads from
// the word that holds p on, and the run's last bytes (runTail), joined by funnel
// shifts. Against two 16-bit loads (or four byte loads) a word: N + 1 loads. The
// first load may read up to three bytes before p, in the same aligned word.
template <int N, int kAlign>
__device__ __forceinline__ void loadRun(const uint8_t* p, uint32_t (&w)[N]) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  const unsigned lead = static_cast<unsigned>(addr & 3);
  const uint32_t* a = reinterpret_cast<const uint32_t*>(addr - lead);
  uint32_t word = __ldg(a);
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t next =
        i + 1 < N ? __ldg(a + i + 1) : runTail<kAlign>(reinterpret_cast<const uint8_t*>(a + N), lead);
    w[i] = __funnelshift_r(word, next, 8 * lead);
    word = next;
  }
}

template <ElemType T>
struct TypeInfo;
template <>
struct TypeInfo<ElemType::Q8_0> {
  static constexpr int kBlockBytes = 34, kUnitsPerBlock = 1;
};
template <>
struct TypeInfo<ElemType::Q4_0> {
  static constexpr int kBlockBytes = 18, kUnitsPerBlock = 1;
};
template <>
struct TypeInfo<ElemType::Q4_1> {
  static constexpr int kBlockBytes = 20, kUnitsPerBlock = 1;
};
template <>
struct TypeInfo<ElemType::Q5_0> {
  static constexpr int kBlockBytes = 22, kUnitsPerBlock = 1;
};
template <>
struct TypeInfo<ElemType::Q5_1> {
  static constexpr int kBlockBytes = 24, kUnitsPerBlock = 1;
};
template <>
struct TypeInfo<ElemType::IQ4_NL> {
  static constexpr int kBlockBytes = 18, kUnitsPerBlock = 1;
};
template <>
struct TypeInfo<ElemType::MXFP4> {
  static constexpr int kBlockBytes = 17, kUnitsPerBlock = 1;
};
template <>
struct TypeInfo<ElemType::Q2_K> {
  static constexpr int kBlockBytes = 84, kUnitsPerBlock = 8;
};
template <>
struct TypeInfo<ElemType::Q3_K> {
  static constexpr int kBlockBytes = 110, kUnitsPerBlock = 8;
};
template <>
struct TypeInfo<ElemType::IQ4_XS> {
  static constexpr int kBlockBytes = 136, kUnitsPerBlock = 8;
};
template <>
struct TypeInfo<ElemType::IQ1_S> {
  static constexpr int kBlockBytes = 50, kUnitsPerBlock = 8;
};
template <>
struct TypeInfo<ElemType::IQ1_M> {
  static constexpr int kBlockBytes = 56, kUnitsPerBlock = 8;
};
template <>
struct TypeInfo<ElemType::IQ2_XXS> {
  static constexpr int kBlockBytes = 66, kUnitsPerBlock = 8;
};
template <>
struct TypeInfo<ElemType::IQ2_XS> {
  static constexpr int kBlockBytes = 74, kUnitsPerBlock = 8;
};
template <>
struct TypeInfo<ElemType::IQ2_S> {
  static constexpr int kBlockBytes = 82, kUnitsPerBlock = 8;
};
template <>
struct TypeInfo<ElemType::IQ3_XXS> {
  static constexpr int kBlockBytes = 98, kUnitsPerBlock = 8;
};
template <>
struct TypeInfo<ElemType::IQ3_S> {
  static constexpr int kBlockBytes = 110, kUnitsPerBlock = 8;
};
template <>
struct TypeInfo<ElemType::Q4_K> {
  static constexpr int kBlockBytes = 144, kUnitsPerBlock = 8;
};
template <>
struct TypeInfo<ElemType::Q5_K> {
  static constexpr int kBlockBytes = 176, kUnitsPerBlock = 8;
};
template <>
struct TypeInfo<ElemType::Q6_K> {
  static constexpr int kBlockBytes = 210, kUnitsPerBlock = 8;
};

// Calls f(std::integral_constant<ElemType, t>{}): a kernel template instantiated per type.
template <typename F>
void withType(ElemType t, F&& f) {
  switch (t) {
    case ElemType::F32: return f(std::integral_constant<ElemType, ElemType::F32>{});
    case ElemType::F16: return f(std::integral_constant<ElemType, ElemType::F16>{});
    case ElemType::BF16: return f(std::integral_constant<ElemType, ElemType::BF16>{});
    case ElemType::Q8_0: return f(std::integral_constant<ElemType, ElemType::Q8_0>{});
    case ElemType::Q4_0: return f(std::integral_constant<ElemType, ElemType::Q4_0>{});
    case ElemType::Q4_K: return f(std::integral_constant<ElemType, ElemType::Q4_K>{});
    case ElemType::Q5_K: return f(std::integral_constant<ElemType, ElemType::Q5_K>{});
    case ElemType::Q6_K: return f(std::integral_constant<ElemType, ElemType::Q6_K>{});
    case ElemType::Q4_1: return f(std::integral_constant<ElemType, ElemType::Q4_1>{});
    case ElemType::Q5_0: return f(std::integral_constant<ElemType, ElemType::Q5_0>{});
    case ElemType::Q5_1: return f(std::integral_constant<ElemType, ElemType::Q5_1>{});
    case ElemType::IQ4_NL: return f(std::integral_constant<ElemType, ElemType::IQ4_NL>{});
    case ElemType::MXFP4: return f(std::integral_constant<ElemType, ElemType::MXFP4>{});
    case ElemType::Q2_K: return f(std::integral_constant<ElemType, ElemType::Q2_K>{});
    case ElemType::Q3_K: return f(std::integral_constant<ElemType, ElemType::Q3_K>{});
    case ElemType::IQ4_XS: return f(std::integral_constant<ElemType, ElemType::IQ4_XS>{});
    case ElemType::IQ1_S: return f(std::integral_constant<ElemType, ElemType::IQ1_S>{});
    case ElemType::IQ1_M: return f(std::integral_constant<ElemType, ElemType::IQ1_M>{});
    case ElemType::IQ2_XXS: return f(std::integral_constant<ElemType, ElemType::IQ2_XXS>{});
    case ElemType::IQ2_XS: return f(std::integral_constant<ElemType, ElemType::IQ2_XS>{});
    case ElemType::IQ2_S: return f(std::integral_constant<ElemType, ElemType::IQ2_S>{});
    case ElemType::IQ3_XXS: return f(std::integral_constant<ElemType, ElemType::IQ3_XXS>{});
    case ElemType::IQ3_S: return f(std::integral_constant<ElemType, ElemType::IQ3_S>{});
  }
}

__host__ __device__ constexpr bool isFloatType(ElemType t) {
  return t == ElemType::F32 || t == ElemType::F16 || t == ElemType::BF16;
}
__host__ __device__ constexpr bool isGridType(ElemType t) {
  return t == ElemType::IQ1_S || t == ElemType::IQ1_M || t == ElemType::IQ2_XXS || t == ElemType::IQ2_XS ||
         t == ElemType::IQ2_S || t == ElemType::IQ3_XXS || t == ElemType::IQ3_S;
}
__host__ __device__ constexpr bool usesQ8K(ElemType t) {
  return t == ElemType::Q4_K || t == ElemType::Q5_K || t == ElemType::Q6_K || t == ElemType::Q2_K ||
         t == ElemType::Q3_K || t == ElemType::IQ4_XS || isGridType(t);
}
// Types whose two halves of a unit (16 elements each) have scales of their own.
__host__ __device__ constexpr bool hasHalfScales(ElemType t) {
  return t == ElemType::Q6_K || t == ElemType::Q3_K || t == ElemType::Q2_K || t == ElemType::IQ2_XS ||
         t == ElemType::IQ2_S || t == ElemType::IQ1_M;
}
// Types whose halves also subtract a bias times the activation's sum there.
__host__ __device__ constexpr bool needsHalfSums(ElemType t) {
  return t == ElemType::Q6_K || t == ElemType::Q3_K || t == ElemType::Q2_K;
}

// The activation rows of `weights`' format at act (quantised as described above,
// or float rows for F32/F16/BF16 weights).
ActRows actRows(ElemType weights, const void* act, int64_t cols, int n_rows);

// One decoded unit: v[i] holds elements 4i..4i+3 as bytes; the value is
// sc0 * (v.x - bias * sum x)[words 0..3] + sc1 * (...)[words 4..7], scaled by d,
// minus m * (sum x) scaled by dmin (Q2_K: m = m0 | m1 << 8, one min per half;
// Q4_1/Q5_1: dmin holds the block's m, added).
struct Unit {
  int v[8];
  int sc0 = 1, sc1 = 1, m = 0, bias = 0;
  float d = 0.0f, dmin = 0.0f;
};

// Pair k (0..7) of the 12 packed scale bytes of a Q4_K / Q5_K block.
__device__ __forceinline__ void scaleMinK4(const uint8_t* s, int k, int& sc, int& m) {
  if (k < 4) {
    sc = s[k] & 63;
    m = s[k + 4] & 63;
  } else {
    sc = (s[k + 4] & 15) | ((s[k - 4] >> 6) << 4);
    m = (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
  }
}

// scaleMinK4 on the scale bytes held as three little-endian words (bytes 0..3, 4..7, 8..11).
__device__ __forceinline__ void scaleMinK4Words(uint32_t s0, uint32_t s4, uint32_t s8, int k, int& sc,
                                                int& m) {
  const int shift = 8 * (k & 3);
  const int a = (s0 >> shift) & 0xff, b = (s4 >> shift) & 0xff, c = (s8 >> shift) & 0xff;
  if (k < 4) {
    sc = a & 63;
    m = b & 63;
  } else {
    sc = (c & 15) | ((a >> 6) << 4);
    m = (c >> 4) | ((b >> 6) << 4);
  }
}

// The IQ4_NL values (ggml-common.h kvalues_iq4nl) and the doubled e2m1 values of
// MXFP4 (kvalues_mxfp4), four bytes to a word.
__device__ __forceinline__ uint32_t tableWord(ElemType t, int i) {  // i: 0..3
  constexpr uint32_t kIq4[4] = {0xbfad9881u, 0xf6eaddcfu, 0x26190d01u, 0x71594535u};
  constexpr uint32_t kFp4[4] = {0x03020100u, 0x0c080604u, 0xfdfeff00u, 0xf4f8fafcu};
  return t == ElemType::MXFP4 ? kFp4[i] : kIq4[i];
}

// Four bytes of 4-bit indices (one per byte, 0..15) replaced by the table's values:
// two byte permutes (selectors of 3 bits, one per nibble) and a choice per byte.
template <ElemType T>
__device__ __forceinline__ int lookup4(uint32_t idx) {
  const uint32_t sel = (idx & 7u) | ((idx >> 4) & 0x70u) | ((idx >> 8) & 0x700u) | ((idx >> 12) & 0x7000u);
  const uint32_t lo = __byte_perm(tableWord(T, 0), tableWord(T, 1), sel);
  const uint32_t hi = __byte_perm(tableWord(T, 2), tableWord(T, 3), sel);
  const uint32_t high_half = ((idx >> 3) & 0x01010101u) * 0xffu;  // 0xff bytes where the index >= 8
  return static_cast<int>((lo & ~high_half) | (hi & high_half));
}

// The unit's 32 elements from 16 bytes of nibbles in the Q4_0 order (byte j:
// element j low, j + 16 high), each nibble replaced by the table value.
template <ElemType T, int kAlign>
__device__ __forceinline__ void tableNibbles(const uint8_t* qs, int* v) {
  uint32_t q[4];
  loadRun<4, kAlign>(qs, q);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[i] = lookup4<T>(q[i] & 0x0f0f0f0fu);
    v[i + 4] = lookup4<T>((q[i] >> 4) & 0x0f0f0f0fu);
  }
}

// 2^(e-128): the MXFP4 scale halved, exact for every e (ggml GGML_E8M0_TO_FP32_HALF).
__device__ __forceinline__ float e8m0Half(uint8_t e) {
  return __uint_as_float(e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23));
}

// Sub-block k of a grid-coded block (quant/quant_grids.h gives the layouts).
template <ElemType T>
__device__ __forceinline__ void loadGridUnit(const uint8_t* blk, int k, Unit& un) {
  using namespace grid;
  if constexpr (T == ElemType::IQ2_XXS || T == ElemType::IQ3_XXS) {
    const bool three = T == ElemType::IQ3_XXS;
    const uint8_t* q = blk + 2 + 8 * k;
    const uint8_t* a = three ? blk + 66 + 4 * k : q + 4;
    const uint32_t aux = loadU16(a) | (loadU16(a + 2) << 16);
    un.d = f16At(blk) * (three ? 0.25f : 0.125f);
    un.sc0 = un.sc1 = 2 * static_cast<int>(aux >> 28) + 1;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t mags = three ? (static_cast<uint64_t>(kIq3xxs[q[2 * l]]) |
                                     (static_cast<uint64_t>(kIq3xxs[q[2 * l + 1]]) << 32))
                                  : kIq2xxs[q[l]];
      signedWords(mags, signBits(aux >> (7 * l)), un.v + 2 * l);
    }
  } else if constexpr (T == ElemType::IQ2_XS || T == ElemType::IQ2_S) {
    const bool xs = T == ElemType::IQ2_XS;
    const uint8_t sc = blk[(xs ? 66 : 74) + k];
    un.d = f16At(blk) * 0.125f;
    un.sc0 = 2 * (sc & 15) + 1;
    un.sc1 = 2 * (sc >> 4) + 1;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      if (xs) {
        const uint32_t v = loadU16(blk + 2 + 2 * (4 * k + l));
        signedWords(kIq2xs[v & 511u], signBits(v >> 9), un.v + 2 * l);
      } else {
        const int index = blk[2 + 4 * k + l] | (((blk[66 + k] >> (2 * l)) & 3) << 8);
        signedWords(kIq2s[index], blk[34 + 4 * k + l], un.v + 2 * l);
      }
    }
  } else if constexpr (T == ElemType::IQ3_S) {
    const uint8_t* q = blk + 2 + 8 * k;
    const uint8_t qh = blk[66 + k];
    un.d = f16At(blk);
    un.sc0 = un.sc1 = 2 * ((blk[106 + k / 2] >> (4 * (k % 2))) & 15) + 1;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint64_t lo = kIq3s[q[2 * l] | (((qh >> (2 * l)) & 1) << 8)];
      const uint64_t hi = kIq3s[q[2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8)];
      signedWords(lo | (hi << 32), blk[74 + 4 * k + l], un.v + 2 * l);
    }
  } else if constexpr (T == ElemType::IQ1_S) {
    const uint32_t h = loadU16(blk + 34 + 2 * k);
    un.d = f16At(blk) * 0.125f;
    un.sc0 = un.sc1 = 2 * static_cast<int>((h >> 12) & 7) + 1;
    const int delta = (h & 0x8000u) ? -1 : 1;
#pragma unroll
    for (int l = 0; l < 4; ++l)
      iq1Words(kIq1s[blk[2 + 4 * k + l] | (((h >> (3 * l)) & 7) << 8)], delta, un.v + 2 * l);
  } else {  // IQ1_M
    const uint8_t* sc = blk + 48;
    const uint32_t d_bits = (loadU16(sc) >> 12) | ((loadU16(sc + 2) >> 8) & 0x00f0u) |
                            ((loadU16(sc + 4) >> 4) & 0x0f00u) | (loadU16(sc + 6) & 0xf000u);
    un.d = __half2float(__ushort_as_half(static_cast<unsigned short>(d_bits))) * 0.125f;
    const uint32_t s = loadU16(sc + 2 * (k / 2)) >> (6 * (k % 2));
    un.sc0 = 2 * static_cast<int>(s & 7) + 1;
    un.sc1 = 2 * static_cast<int>((s >> 3) & 7) + 1;
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      const uint8_t qh = blk[32 + 2 * k + l / 2];
      const int nib = (l % 2) ? qh >> 4 : qh & 15;
      iq1Words(kIq1s[blk[4 * k + l] | ((nib & 7) << 8)], (nib & 8) ? -1 : 1, un.v + 2 * l);
    }
  }
}

template <ElemType T>
__device__ __forceinline__ Unit loadUnit(const uint8_t* row, int u) {
#if MOECHAT_CUDA_STANDIN
  ::cudastandin::countWeightLoad(8 * TypeInfo<T>::kBlockBytes / TypeInfo<T>::kUnitsPerBlock);
#endif
  Unit un;
  const uint8_t* blk = row + static_cast<size_t>(u / TypeInfo<T>::kUnitsPerBlock) * TypeInfo<T>::kBlockBytes;
  if constexpr (T == ElemType::Q8_0) {
    un.d = f16At(blk);
    uint32_t q[8];
    loadRun<8, 2>(blk + 2, q);
#pragma unroll
    for (int i = 0; i < 8; ++i) un.v[i] = static_cast<int>(q[i]);
  } else if constexpr (T == ElemType::Q4_0) {
    un.d = f16At(blk);
    un.bias = 8;
    uint32_t q[4];
    loadRun<4, 2>(blk + 2, q);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      un.v[i] = static_cast<int>(q[i] & 0x0f0f0f0fu);
      un.v[i + 4] = static_cast<int>((q[i] >> 4) & 0x0f0f0f0fu);
    }
  } else if constexpr (T == ElemType::Q4_K || T == ElemType::Q5_K) {
    const int j = u % 8;
    un.d = f16At(blk);
    un.dmin = f16At(blk + 2);
    int sc = 0;
    scaleMinK4(blk + 4, j, sc, un.m);
    un.sc0 = un.sc1 = sc;
    const uint8_t* qs = blk + (T == ElemType::Q5_K ? 48 : 16) + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    uint32_t q[8];
    loadRun<8, 2>(qs, q);
#pragma unroll
    for (int i = 0; i < 8; ++i) un.v[i] = static_cast<int>((q[i] >> shift) & 0x0f0f0f0fu);
    if constexpr (T == ElemType::Q5_K) {
      uint32_t qh[8];
      loadRun<8, 2>(blk + 16, qh);
#pragma unroll
      for (int i = 0; i < 8; ++i) un.v[i] |= static_cast<int>(((qh[i] >> j) & 0x01010101u) << 4);
    }
  } else if constexpr (T == ElemType::Q4_1 || T == ElemType::Q5_1 || T == ElemType::Q5_0) {
    const bool has_m = T != ElemType::Q5_0, has_qh = T != ElemType::Q4_1;
    un.d = f16At(blk);
    if (has_m) un.dmin = f16At(blk + 2);
    if (T == ElemType::Q5_0) un.bias = 16;
    const uint8_t* qs = blk + (has_m ? 4 : 2) + (has_qh ? 4 : 0);
    uint32_t qh = 0;
    if constexpr (T != ElemType::Q4_1) {
      uint32_t h[1];
      loadRun<1, 2>(blk + (has_m ? 4 : 2), h);
      qh = h[0];
    }
    uint32_t q[4];
    loadRun<4, 2>(qs, q);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      un.v[i] = static_cast<int>(q[i] & 0x0f0f0f0fu);
      un.v[i + 4] = static_cast<int>((q[i] >> 4) & 0x0f0f0f0fu);
      if (has_qh) {  // bits 4i..4i+3 (low nibbles) and 16 + 4i.. (high) as bit 4 of each byte
        const uint32_t lo = (qh >> (4 * i)) & 15u, hi = (qh >> (16 + 4 * i)) & 15u;
        un.v[i] |=
            static_cast<int>(((lo & 1u) | ((lo & 2u) << 7) | ((lo & 4u) << 14) | ((lo & 8u) << 21)) << 4);
        un.v[i + 4] |=
            static_cast<int>(((hi & 1u) | ((hi & 2u) << 7) | ((hi & 4u) << 14) | ((hi & 8u) << 21)) << 4);
      }
    }
  } else if constexpr (T == ElemType::IQ4_NL) {
    un.d = f16At(blk);
    tableNibbles<T, 2>(blk + 2, un.v);
  } else if constexpr (T == ElemType::MXFP4) {
    un.d = e8m0Half(blk[0]);
    tableNibbles<T, 1>(blk + 1, un.v);
  } else if constexpr (T == ElemType::IQ4_XS) {
    const int k = u % 8;
    un.d = f16At(blk);
    un.sc0 = un.sc1 =
        (((blk[4 + k / 2] >> (4 * (k % 2))) & 15) | (((ld16(blk + 2) >> (2 * k)) & 3) << 4)) - 32;
    tableNibbles<ElemType::IQ4_NL, 2>(blk + 8 + 16 * k, un.v);
  } else if constexpr (T == ElemType::Q2_K || T == ElemType::Q3_K) {
    const int k = u % 8, h = k / 4, g = k % 4;  // elements 128h + 32g + l, l < 32
    const uint8_t* qs = blk + (T == ElemType::Q2_K ? 16 : 32) + 32 * h;
    uint32_t q[8];
    loadRun<8, 2>(qs, q);
#pragma unroll
    for (int i = 0; i < 8; ++i) un.v[i] = static_cast<int>((q[i] >> (2 * g)) & 0x03030303u);
    if constexpr (T == ElemType::Q2_K) {
      un.d = f16At(blk + 80);
      un.dmin = f16At(blk + 82);
      const int s0 = blk[2 * k], s1 = blk[2 * k + 1];  // scale | min << 4 of the two halves
      un.sc0 = s0 & 15, un.sc1 = s1 & 15;
      un.m = (s0 >> 4) | ((s1 >> 4) << 8);
    } else {
      un.d = f16At(blk + 108);
      un.bias = 4;
      uint32_t hmask[8];
      loadRun<8, 2>(blk, hmask);
#pragma unroll
      for (int i = 0; i < 8; ++i) un.v[i] |= static_cast<int>(((hmask[i] >> k) & 0x01010101u) << 2);  // bit k
      const uint8_t* sc = blk + 96;
      auto scale = [sc](int j) {  // scale j (0..15) minus 32
        return (((sc[j % 8] >> (4 * (j / 8))) & 15) | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
      };
      un.sc0 = scale(2 * k);
      un.sc1 = scale(2 * k + 1);
    }
  } else if constexpr (isGridType(T)) {
    loadGridUnit<T>(blk, u % 8, un);
  } else if constexpr (T == ElemType::Q6_K) {
    const int h = (u % 8) / 4, g = u % 4;
    const uint8_t* ql = blk + 64 * h + 32 * (g & 1);
    const uint8_t* qh = blk + 128 + 32 * h;
    const int lo_shift = 4 * (g >> 1), hi_shift = 2 * g;
    un.d = f16At(blk + 208);
    un.sc0 = static_cast<int8_t>(blk[192 + 2 * (u % 8)]);
    un.sc1 = static_cast<int8_t>(blk[192 + 2 * (u % 8) + 1]);
    un.bias = 32;
    uint32_t low[8], high[8];
    loadRun<8, 2>(ql, low);
    loadRun<8, 2>(qh, high);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      un.v[i] = static_cast<int>(((low[i] >> lo_shift) & 0x0f0f0f0fu) |
                                 (((high[i] >> hi_shift) & 0x03030303u) << 4));
  }
  return un;
}

// Types whose units loadUnitWide reads (blocks a multiple of 16 bytes).
__host__ __device__ constexpr bool hasWideUnits(ElemType t) {
  return t == ElemType::Q4_K || t == ElemType::Q5_K;
}

// Whether the units of `row` can be read 16 bytes at a time: the same answer for
// every lane of a warp, so the branch on it never diverges.
template <ElemType T>
__device__ __forceinline__ bool wideRow(const uint8_t* row) {
  if constexpr (hasWideUnits(T)) return (reinterpret_cast<uintptr_t>(row) & 15) == 0;
  (void)row;
  return false;
}

__device__ __forceinline__ uint4 ld128(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

// loadUnit for a row wideRow accepts: the block's header (d, dmin, the 12 scale
// bytes) in one load, the unit's 32 quant bytes in two (Q5_K: its high bits in two more).
template <ElemType T>
__device__ __forceinline__ Unit loadUnitWide(const uint8_t* row, int u) {
  static_assert(hasWideUnits(T), "loadUnitWide: a type whose blocks are multiples of 16 bytes");
#if MOECHAT_CUDA_STANDIN
  ::cudastandin::countWeightLoad(8 * TypeInfo<T>::kBlockBytes / TypeInfo<T>::kUnitsPerBlock);
#endif
  Unit un;
  const uint8_t* blk = row + static_cast<size_t>(u / 8) * TypeInfo<T>::kBlockBytes;
  const int j = u % 8;
  const uint4 head = ld128(blk);
  un.d = __half2float(__ushort_as_half(static_cast<unsigned short>(head.x & 0xffffu)));
  un.dmin = __half2float(__ushort_as_half(static_cast<unsigned short>(head.x >> 16)));
  int sc = 0;
  scaleMinK4Words(head.y, head.z, head.w, j, sc, un.m);
  un.sc0 = un.sc1 = sc;
  const uint8_t* qs = blk + (T == ElemType::Q5_K ? 48 : 16) + 32 * (j / 2);
  const uint4 q0 = ld128(qs), q1 = ld128(qs + 16);
  const uint32_t q[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
  const int shift = 4 * (j % 2);
#pragma unroll
  for (int i = 0; i < 8; ++i) un.v[i] = static_cast<int>((q[i] >> shift) & 0x0f0f0f0fu);
  if constexpr (T == ElemType::Q5_K) {
    const uint4 h0 = ld128(blk + 16), h1 = ld128(blk + 32);
    const uint32_t qh[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) un.v[i] |= static_cast<int>(((qh[i] >> j) & 0x01010101u) << 4);
  }
  return un;
}

// Unit u of a row: 16-byte loads where the row allows them, else 16-bit ones.
template <ElemType T>
__device__ __forceinline__ Unit loadUnitFast(const uint8_t* row, int u) {
  if constexpr (hasWideUnits(T))
    if (wideRow<T>(row)) return loadUnitWide<T>(row, u);
  return loadUnit<T>(row, u);
}

// A unit's value from its integer dot products with the activation's bytes: p0
// over words 0..3 and p1 over words 4..7, s0 and s1 the sums of those bytes, dx
// the activation's scale. Only Q6_K (a scale per half) needs the halves apart;
// for the other types p0 + p1 and s0 + s1 are what count.
template <ElemType T>
__device__ __forceinline__ float unitValue(int sc0, int sc1, int m, float d, float dmin, int p0, int p1,
                                           int s0, int s1, float dx) {
  if constexpr (isGridType(T)) {
    (void)m, (void)dmin, (void)s0, (void)s1;
    return static_cast<float>(sc0 * p0 + sc1 * p1) * (d * dx);
  } else if constexpr (T == ElemType::Q6_K || T == ElemType::Q3_K) {
    constexpr int kBias = T == ElemType::Q6_K ? 32 : 4;
    const int total = sc0 * (p0 - kBias * s0) + sc1 * (p1 - kBias * s1);
    return static_cast<float>(total) * (d * dx);
  } else if constexpr (T == ElemType::Q2_K) {
    const int total = sc0 * p0 + sc1 * p1;
    const int mins = (m & 0xff) * s0 + (m >> 8) * s1;
    return static_cast<float>(total) * (d * dx) - static_cast<float>(mins) * (dmin * dx);
  } else if constexpr (T == ElemType::Q4_1 || T == ElemType::Q5_1) {
    (void)sc0, (void)sc1, (void)m;
    return static_cast<float>(p0 + p1) * (d * dx) + static_cast<float>(s0 + s1) * (dmin * dx);
  } else if constexpr (T == ElemType::Q5_0) {
    (void)sc0, (void)sc1, (void)m, (void)dmin;
    return static_cast<float>(p0 + p1 - 16 * (s0 + s1)) * (d * dx);
  } else if constexpr (T == ElemType::IQ4_XS) {
    (void)sc1, (void)m, (void)dmin, (void)s0, (void)s1;
    return static_cast<float>(sc0 * (p0 + p1)) * (d * dx);
  } else if constexpr (T == ElemType::Q4_0) {
    const int total = p0 + p1 - 8 * (s0 + s1);
    return static_cast<float>(total) * (d * dx);
  } else if constexpr (T == ElemType::Q4_K || T == ElemType::Q5_K) {
    const int total = sc0 * (p0 + p1);
    const int mins = m * (s0 + s1);
    return static_cast<float>(total) * (d * dx) - static_cast<float>(mins) * (dmin * dx);
  } else {
    (void)sc0, (void)sc1, (void)m, (void)dmin, (void)s0, (void)s1;
    return static_cast<float>(p0 + p1) * (d * dx);
  }
}

// The unit's contribution for activation row r (unit u).
template <ElemType T>
__device__ __forceinline__ float unitDot(const Unit& un, const ActRows& a, int64_t r, int u) {
  const int* x = reinterpret_cast<const int*>(a.q + r * a.cols + 32 * static_cast<int64_t>(u));
  int p0 = 0, p1 = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int xi = x[i], xj = x[i + 4];
    p0 = __dp4a(un.v[i], xi, p0);
    p1 = __dp4a(un.v[i + 4], xj, p1);
  }
  int s0 = 0, s1 = 0;
  if constexpr (needsHalfSums(T)) {  // the two halves have their own scales and biases
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s0 = __dp4a(0x01010101, x[i], s0);
      s1 = __dp4a(0x01010101, x[i + 4], s1);
    }
  } else if constexpr (T == ElemType::Q4_0 || T == ElemType::Q4_1 || T == ElemType::Q5_0 ||
                       T == ElemType::Q5_1 || T == ElemType::Q4_K || T == ElemType::Q5_K) {
    s0 = a.s[r * a.units + u];
  }
  return unitValue<T>(un.sc0, un.sc1, un.m, un.d, un.dmin, p0, p1, s0, s1, a.d[r * a.units + u]);
}

// Element c of a float-typed row.
template <ElemType T>
__device__ __forceinline__ float floatAt(const uint8_t* row, int64_t c) {
#if MOECHAT_CUDA_STANDIN
  ::cudastandin::countWeightLoad(8 * (T == ElemType::F32 ? 4 : 2));
#endif
  if constexpr (T == ElemType::F32) return __uint_as_float(ld16(row + 4 * c) | (ld16(row + 4 * c + 2) << 16));
  if constexpr (T == ElemType::F16) return f16At(row + 2 * c);
  return __uint_as_float(ld16(row + 2 * c) << 16);  // BF16
}

// Warp-wide sum; every lane gets the total.
__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The dot products of one weight row with up to NT activation rows (rows[i] for
// i < nt), summed over the warp: every lane returns with acc[i] = the total. The
// row's bytes are read once for the NT rows. A lane takes its units two at a time,
// so the loads of both are in flight together: in a decode step a lane has a few
// units of a row, and the kernels wait on memory latency more than on bandwidth.
// Each lane still adds its units in order (u, u + 32, u + 64, ...), so the sums are
// the same bits as one unit at a time. (Gate and up read together, four units in
// flight, took the expert kernel to 147-180 registers for ptxas: fewer warps.)
template <ElemType T, int NT>
__device__ __forceinline__ void rowDot(const uint8_t* row, const ActRows& a, const int64_t* rows, int nt,
                                       float* acc) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < NT; ++i) acc[i] = 0.0f;
  if constexpr (isFloatType(T)) {
    for (int64_t c = lane; c < a.cols; c += 32) {
      const float w = floatAt<T>(row, c);
#pragma unroll
      for (int i = 0; i < NT; ++i)
        if (i < nt) acc[i] += w * a.f[rows[i] * a.cols + c];
    }
  } else {
    int u = lane;
    for (; u + 32 < a.units; u += 64) {
      const Unit first = loadUnitFast<T>(row, u), second = loadUnitFast<T>(row, u + 32);
#pragma unroll
      for (int i = 0; i < NT; ++i)
        if (i < nt) {
          acc[i] += unitDot<T>(first, a, rows[i], u);
          acc[i] += unitDot<T>(second, a, rows[i], u + 32);
        }
    }
    if (u < a.units) {
      const Unit last = loadUnitFast<T>(row, u);
#pragma unroll
      for (int i = 0; i < NT; ++i)
        if (i < nt) acc[i] += unitDot<T>(last, a, rows[i], u);
    }
  }
#pragma unroll
  for (int i = 0; i < NT; ++i)
    if (i < nt) acc[i] = warpSum(acc[i]);  // nt is the same in every lane: the shuffles stay whole-warp
}

}  // namespace moe::cuda
