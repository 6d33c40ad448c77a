// Block layouts shared by the decoders and dot products (quant.cpp) and the
// reference quantisers (quant_encode.cpp): sizes, little-endian loads and
// stores, and where a K-quant block keeps its scales and bits. Internal to
// models/; the public API is quant/quant.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "quant/quant.h"
#include "quant/quant_grids.h"

namespace moe::quant::layout {

using gguf::TensorType;

constexpr int kLanes = 32;                     // elements per dot chunk (= Q8_0/Q4_0 block size)
constexpr int kQ8_0Bytes = 34;                 // ggml block_q8_0: f16 d + 32 int8
constexpr int kQ4_0Bytes = 18;                 // ggml block_q4_0: f16 d + 16 nibble pairs
constexpr int kQ4_KBytes = 144;                // f16 d, f16 dmin, scales[12], qs[128]
constexpr int kQ5_KBytes = 176;                // f16 d, f16 dmin, scales[12], qh[32], qs[128]
constexpr int kQ6_KBytes = 210;                // ql[128], qh[64], int8 scales[16], f16 d
constexpr int kSubBlocks = kBlockQK / kLanes;  // 8 sub-blocks of 32 per K-quant block
constexpr int kQ4_1Bytes = 20;                 // f16 d, f16 m, 16 nibble pairs
constexpr int kQ5_0Bytes = 22;                 // f16 d, u32 qh (fifth bits), 16 nibble pairs
constexpr int kQ5_1Bytes = 24;                 // f16 d, f16 m, u32 qh, 16 nibble pairs
constexpr int kIQ4_NLBytes = 18;               // f16 d, 16 nibble pairs (indices into kIq4Values)
constexpr int kMXFP4Bytes = 17;                // e8m0 exponent, 16 nibble pairs (e2m1 codes)
constexpr int kQ2_KBytes = 84;     // scales[16] (4-bit scale | 4-bit min << 4), qs[64], f16 d, f16 dmin
constexpr int kQ3_KBytes = 110;    // hmask[32], qs[64], scales[12] (6-bit), f16 d
constexpr int kIQ4_XSBytes = 136;  // f16 d, u16 scales_h, scales_l[4], qs[128]

// The 16 values an IQ4_NL / IQ4_XS nibble selects (ggml-common.h kvalues_iq4nl).
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};
// The e2m1 (FP4) values of the 16 MXFP4 codes, doubled so they are integers; the
// block scale is halved to match (ggml-common.h kvalues_mxfp4, OCP MX spec v1.0).
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

inline uint16_t loadU16(const uint8_t* p) {  // little-endian, any alignment
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

inline void storeU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// The MXFP4 block scale 2^(e - 127), halved: 2^(e - 128), exact for every e
// (e = 0 and 1 are f32 subnormals; ggml's GGML_E8M0_TO_FP32_HALF).
inline float e8m0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The 6-bit scale k (0..15) of a Q3_K block, minus 32: low 4 bits from nibble k/8 of
// scales[k % 8], high 2 bits from bits 2(k/4) of scales[8 + k % 4].
inline int q3KScale(const uint8_t* s, int k) {  // s: [12]
  const int lo = (s[k % 8] >> (4 * (k / 8))) & 15;
  const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// The 6-bit scale of sub-block k (0..7) of an IQ4_XS block, minus 32.
inline int iq4XsScale(const uint8_t* blk, int k) {
  const int lo = (blk[4 + k / 2] >> (4 * (k % 2))) & 15;
  const int hi = (loadU16(blk + 2) >> (2 * k)) & 3;
  return (lo | (hi << 4)) - 32;
}

// Q2_K and Q3_K keep element 128h + 32g + l (half h, group g of 32, l < 32) in bits
// 2g..2g+1 of qs[32h + l]; its scale is number 8h + 2g + l/16 (sub-blocks of 16).
// Q3_K's third bit is bit 4h + g of hmask[l]; clear means minus 4.

[[noreturn]] inline void throwUnsupported(TensorType t, const char* what) {
  throw std::invalid_argument(std::string("quant: ") + what + ": tensor type " + gguf::tensorTypeName(t) +
                              " (id " + std::to_string(static_cast<uint32_t>(t)) +
                              ") is not supported for compute");
}

// Types whose blocks are 256 elements.
inline bool isKQuant(TensorType t) {
  return t == TensorType::Q4_K || t == TensorType::Q5_K || t == TensorType::Q6_K || t == TensorType::Q2_K ||
         t == TensorType::Q3_K || t == TensorType::IQ4_XS;
}

inline bool isBlock32(TensorType t) {
  return t == TensorType::Q8_0 || t == TensorType::Q4_0 || t == TensorType::Q4_1 || t == TensorType::Q5_0 ||
         t == TensorType::Q5_1 || t == TensorType::IQ4_NL || t == TensorType::MXFP4;
}

inline int blockElems(TensorType t) {
  if (isBlock32(t)) return kBlockQ8_0;
  return isKQuant(t) || grids::isGridType(t) ? kBlockQK : 1;
}

// Pair j (0..7) of the 12 packed scale bytes of Q4_K / Q5_K: 6-bit scale and min.
// Pairs 0..3 are the low 6 bits of bytes j and j+4; pairs 4..7 take their low 4
// bits from byte j+4 (scale: low nibble, min: high nibble) and their top 2 bits from
// the top bits of bytes j-4 (scale) and j (min).
inline void scaleMinK4(const uint8_t* s, int j, int& sc, int& m) {  // s: [12]
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// The inverse of scaleMinK4: packs 8 six-bit scales and mins into 12 bytes.
inline void packScaleMinK4(const int* sc, const int* m, uint8_t* s) {  // sc, m: [8]; s: [12]
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}

// Where sub-block k (0..7, 32 elements) of a Q6_K block finds its bits.
struct Q6Sub {
  const uint8_t* ql;  // [32]: the low 4 bits, nibble ql_shift
  int ql_shift;
  const uint8_t* qh;  // [32]: the high 2 bits at qh_shift
  int qh_shift;
  const int8_t* sc;  // [2]: scales of elements 0..15 and 16..31
};

inline Q6Sub q6Sub(const uint8_t* blk, int k) {
  const int h = k / 4, g = k % 4;  // half of 128, group of 32 in it
  return {blk + 64 * h + 32 * (g & 1), 4 * (g >> 1), blk + 128 + 32 * h, 2 * g,
          reinterpret_cast<const int8_t*>(blk + 192) + 8 * h + 2 * g};
}

inline void checkLength(TensorType t, int64_t n, const char* what) {
  if (n < 0 || n % blockElems(t) != 0) {
    throw std::invalid_argument(std::string("quant: ") + what + ": " + std::to_string(n) +
                                " elements is not a whole number of " + gguf::tensorTypeName(t) + " blocks");
  }
}

}  // namespace moe::quant::layout
