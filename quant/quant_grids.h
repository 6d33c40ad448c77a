// The grid-coded IQ types (ggml's "i-quants" IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S,
// IQ3_XXS, IQ3_S): blocks of 256 elements in sub-blocks of 32, each sub-block four
// groups of 8 whose magnitudes are one entry of a lattice table (quant_grids.cpp),
// with per-group signs and an odd integer scale (2s + 1) per group.
//
// Block layouts (ggml-common.h block_iq*; little-endian; d an f16):
//   IQ2_XXS  66 bytes: d, u16 qs[32]. Sub-block k: the 8 bytes at 2 + 8k are a u32 of
//            four 8-bit grid indices (group l: byte l) and a u32 whose bits 7l..7l+6
//            are group l's sign index and bits 28..31 the scale s.
//   IQ2_XS   74 bytes: d, u16 qs[32], u8 scales[8]. Group l of sub-block k: q =
//            qs[4k + l], grid index q & 511, sign index q >> 9; scale s: the low nibble
//            of scales[k] for groups 0-1, the high nibble for groups 2-3.
//   IQ2_S    82 bytes: d, u8 qs[32], u8 signs[32], u8 qh[8], u8 scales[8]. Group l of
//            sub-block k: grid index qs[4k + l] | (bits 2l, 2l+1 of qh[k]) << 8, sign
//            bits signs[4k + l]; scales as IQ2_XS.
//   IQ3_XXS  98 bytes: d, u8 qs[64], u32 scales_and_signs[8]. Group l of sub-block k:
//            elements 0-3 from grid entry qs[8k + 2l], 4-7 from qs[8k + 2l + 1]; sign
//            index and scale as IQ2_XXS's second u32 (at 66 + 4k).
//   IQ3_S   110 bytes: d, u8 qs[64], u8 qh[8], u8 signs[32], u8 scales[4]. Group l of
//            sub-block k: entries qs[8k + 2l] | (bit 2l of qh[k]) << 8 and
//            qs[8k + 2l + 1] | (bit 2l+1 of qh[k]) << 8, sign bits signs[4k + l];
//            scale s: nibble k % 2 of scales[k / 2].
//   IQ1_S    50 bytes: d, u8 qs[32], u16 qh[8]. Sub-block k: h = qh[k]; group l's grid
//            index qs[4k + l] | ((h >> 3l) & 7) << 8; s = (h >> 12) & 7; bit 15 of h
//            the delta's sign (set: -1/8).
//   IQ1_M    56 bytes: u8 qs[32], u8 qh[16], u16 sc[4]. d is the f16 whose nibbles are
//            the top nibbles of sc[0..3]; sub-block k: index of group l qs[4k + l] |
//            (3 bits of qh[2k + l/2] at 4 * (l % 2)) << 8, the delta's sign bit 3 + 4 *
//            (l % 2) of that byte; s of groups 0-1: bits 6(k%2)..+2 of sc[k/2], groups
//            2-3: the next 3 bits.
// A sign index i (7 bits) gives the 8 sign bits i | parity(i) << 7 (an even number of
// minus signs; ggml's ksigns_iq2xs); sign bit j set: element j is negative.
//
// Values (as ggml's dequantize_row_iq*, bit for bit): element = (d * m) * (g + delta)
// where g is the signed grid value, m = (2s + 1) times a per-type factor (IQ2_*:
// 1/8, IQ3_XXS: 1/4, IQ3_S and IQ1_*: 1) and delta = +-1/8 for IQ1_*, else 0.
#pragma once

#include <cstdint>

#include "models/gguf.h"

namespace moe::quant::grids {

extern const uint64_t kIq2xxsGrid[256];
extern const uint64_t kIq2xsGrid[512];
extern const uint64_t kIq2sGrid[1024];
extern const uint32_t kIq3xxsGrid[256];
extern const uint32_t kIq3sGrid[512];
extern const uint64_t kIq1sGrid[2048];  // bytes are int8 -1, 0, 1

inline constexpr int kIQ2_XXSBytes = 66;
inline constexpr int kIQ2_XSBytes = 74;
inline constexpr int kIQ2_SBytes = 82;
inline constexpr int kIQ3_XXSBytes = 98;
inline constexpr int kIQ3_SBytes = 110;
inline constexpr int kIQ1_SBytes = 50;
inline constexpr int kIQ1_MBytes = 56;

inline bool isGridType(gguf::TensorType t) {
  using gguf::TensorType;
  return t == TensorType::IQ2_XXS || t == TensorType::IQ2_XS || t == TensorType::IQ2_S ||
         t == TensorType::IQ3_XXS || t == TensorType::IQ3_S || t == TensorType::IQ1_S ||
         t == TensorType::IQ1_M;
}

int blockBytes(gguf::TensorType t);

// The 8 sign bits of a 7-bit sign index.
inline uint8_t signBits(uint32_t index7) {
  const uint32_t i = index7 & 127;
  return static_cast<uint8_t>(i | ((__builtin_popcount(i) & 1) << 7));
}

// One sub-block of 32 elements in integers: element 8l + j = m_l * (q[8l + j] +
// delta_l / 8) * d * factor.
struct GridSub {
  int8_t q[32];  // signed grid values
  int m[4];      // 2s + 1 per group of 8
  int delta[4];  // IQ1_*: +1 or -1 per group; 0 for the others
};

// Sub-block k (0..7) of the block at blk.
void gridSub(gguf::TensorType t, const uint8_t* blk, int k, GridSub& s);

// The block's d (IQ1_M: assembled from its scales' top nibbles).
float gridBlockD(gguf::TensorType t, const uint8_t* blk);

// The power of two each m is multiplied by: 1/8, 1/4 or 1.
float gridFactor(gguf::TensorType t);

}  // namespace moe::quant::grids

namespace moe::quant::grids {

// Encodes n floats (a whole number of 256-blocks) as type t: per block d from the
// largest magnitude, per scale unit the odd multiplier that fits its largest, per group
// the nearest grid entry (least squares, searched exhaustively; IQ2_XXS/IQ2_XS/IQ3_XXS
// flip the smallest element's sign where the minus signs are odd). A simple
// deterministic quantiser of our own for the synthetic models and the tests, not
// llama.cpp's importance-weighted search: slow on the large grids, and its bytes
// differ from llama-quantize's. dst: rowBytes(t, n) bytes.
void quantizeGridRow(gguf::TensorType t, const float* src, uint8_t* dst, int64_t n);

}  // namespace moe::quant::grids
