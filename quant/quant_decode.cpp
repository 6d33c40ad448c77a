// The portable decoders: the exact f32 values of a row's elements. Block layouts follow ggml's block
// definitions (ggml-common.h: block_q8_0, block_q4_0), summarised in shared/GGUF-NOTES.md:
//   Q8_0: 34 bytes = { f16 d; int8 q[32] }          value_j = d * q[j]
//   Q4_0: 18 bytes = { f16 d; uint8 qs[16] }        byte j: low nibble = element j,
//                                                   high nibble = element j + 16,
//                                                   value = d * (nibble - 8)
//   K-quants, 256 elements (QK_K) per block, in 32-element sub-blocks:
//   Q4_K: 144 bytes = { f16 d; f16 dmin; u8 scales[12]; u8 qs[128] }
//         sub-block k (0..7): scale/min pair k (6 bits each, packed in scales[12]),
//         q = nibble of qs[32*(k/2) + l] (low nibble for even k, high for odd),
//         value = (d*sc)*q - dmin*m
//   Q5_K: 176 bytes = { f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }
//         as Q4_K, plus bit k of qh[l] as the 5th bit (+16) of sub-block k
//   Q6_K: 210 bytes = { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }  (d last)
//         half h (0..1) of 128, group g (0..3) of 32 in it, l = 0..31:
//         q = (nibble of ql[64h + 32*(g&1) + l], low for g<2) | (2 bits 2g of
//         qh[32h + l]) << 4, value = (d*scales[8h + 2g + l/16]) * (q - 32)
//   The K-quant layouts were checked against ggml-common.h (block_q4_K, block_q5_K,
//   block_q6_K) and llama.cpp gguf-py/gguf/quants.py (Q4_K.get_scale_min and the
//   dequantize_blocks of Q4_K, Q5_K, Q6_K); tests/test_quant.cpp builds blocks field
//   by field from this description.
// Multi-byte fields are little-endian (GGUF files are little-endian).
// The types added after those (checked against ggml-quants.c's dequantize_row_*):
//   Q4_1: { f16 d; f16 m; u8 qs[16] }           value = d * q + m
//   Q5_0: { f16 d; u32 qh; u8 qs[16] }          q = nibble | bit j (j + 16 for the
//                                               high nibbles) of qh << 4, value = d * (q - 16)
//   Q5_1: { f16 d; f16 m; u32 qh; u8 qs[16] }   as Q5_0's q, value = d * q + m
//   IQ4_NL: { f16 d; u8 qs[16] }                value = d * kIq4Values[nibble]
//   MXFP4: { u8 e; u8 qs[16] }                  value = 2^(e-128) * kMxfp4Values[nibble]
//   IQ4_XS: 256 = { f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128] }, sub-block k of
//           32: value = d * (scale_k - 32) * kIq4Values[nibble of qs[16k..16k+16)]
//   Q2_K, Q3_K: 256 elements in sub-blocks of 16 (quant_layout.h says where).
//   IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S: quant_grids.h.
// Nibble order in every 32-element block: byte j holds element j (low) and j + 16 (high).
#include "quant/quant_decode.h"

#include <array>
#include <cstring>

#include "quant/quant.h"
#include "quant/quant_grids.h"
#include "quant/quant_layout.h"

namespace moe::quant::decode {
namespace {

using gguf::TensorType;
using namespace layout;

uint32_t loadU32(const uint8_t* p) {  // little-endian, any alignment
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// fp16 -> fp32 for all 65536 codes, built once: the portable decode path looks
// values up instead of branching per element.
const std::array<float, 65536>& fp16Table() {
  static const std::array<float, 65536> table = [] {
    std::array<float, 65536> t{};
    for (uint32_t h = 0; h < 65536; ++h) t[h] = fp16ToFp32(static_cast<uint16_t>(h));
    return t;
  }();
  return table;
}

void decodeF32(const uint8_t* p, float* w, int count) { std::memcpy(w, p, count * sizeof(float)); }

void decodeF16(const uint8_t* p, float* w, int count) {
  const auto& table = fp16Table();
  for (int j = 0; j < count; ++j) w[j] = table[loadU16(p + 2 * j)];
}

void decodeBF16(const uint8_t* p, float* w, int count) {
  for (int j = 0; j < count; ++j) w[j] = bf16ToFp32(loadU16(p + 2 * j));
}

void decodeQ8_0(const uint8_t* blk, float* w) {  // w: [32]
  const float d = fp16Table()[loadU16(blk)];
  const auto* q = reinterpret_cast<const int8_t*>(blk + 2);
  for (int j = 0; j < kBlockQ8_0; ++j) w[j] = d * static_cast<float>(q[j]);
}

void decodeQ4_0(const uint8_t* blk, float* w) {  // w: [32]
  const float d = fp16Table()[loadU16(blk)];
  const uint8_t* qs = blk + 2;
  for (int j = 0; j < kBlockQ4_0 / 2; ++j) {
    w[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
    w[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

void decodeQ4_K(const uint8_t* blk, int k, float* w) {  // w: [32], sub-block k of the block
  const auto& f16 = fp16Table();
  int sc = 0, m = 0;
  scaleMinK4(blk + 4, k, sc, m);
  const float ds = f16[loadU16(blk)] * static_cast<float>(sc);
  const float dm = f16[loadU16(blk + 2)] * static_cast<float>(m);
  const uint8_t* qs = blk + 16 + 32 * (k / 2);
  const int shift = 4 * (k % 2);
  for (int l = 0; l < kLanes; ++l) w[l] = ds * static_cast<float>((qs[l] >> shift) & 15) - dm;
}

void decodeQ5_K(const uint8_t* blk, int k, float* w) {  // w: [32], sub-block k of the block
  const auto& f16 = fp16Table();
  int sc = 0, m = 0;
  scaleMinK4(blk + 4, k, sc, m);
  const float ds = f16[loadU16(blk)] * static_cast<float>(sc);
  const float dm = f16[loadU16(blk + 2)] * static_cast<float>(m);
  const uint8_t* qh = blk + 16;
  const uint8_t* qs = blk + 48 + 32 * (k / 2);
  const int shift = 4 * (k % 2);
  for (int l = 0; l < kLanes; ++l) {
    const int q = ((qs[l] >> shift) & 15) | (((qh[l] >> k) & 1) << 4);
    w[l] = ds * static_cast<float>(q) - dm;
  }
}

void decodeQ6_K(const uint8_t* blk, int k, float* w) {  // w: [32], sub-block k of the block
  const float d = fp16Table()[loadU16(blk + 208)];
  const Q6Sub s = q6Sub(blk, k);
  for (int l = 0; l < kLanes; ++l) {
    const int q = ((s.ql[l] >> s.ql_shift) & 15) | (((s.qh[l] >> s.qh_shift) & 3) << 4);
    w[l] = (d * static_cast<float>(s.sc[l / 16])) * static_cast<float>(q - 32);
  }
}

// Q4_1 / Q5_1 (fifth == true): value = d * q + m, q the nibble (plus the fifth bit).
void decodeQ45_1(const uint8_t* blk, bool fifth, float* w) {  // w: [32]
  const auto& f16 = fp16Table();
  const float d = f16[loadU16(blk)], m = f16[loadU16(blk + 2)];
  const uint32_t qh = fifth ? loadU32(blk + 4) : 0;
  const uint8_t* qs = blk + (fifth ? 8 : 4);
  for (int j = 0; j < 16; ++j) {
    const int q0 = (qs[j] & 15) | static_cast<int>(((qh >> j) & 1) << 4);
    const int q1 = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
    w[j] = d * static_cast<float>(q0) + m;
    w[j + 16] = d * static_cast<float>(q1) + m;
  }
}

void decodeQ5_0(const uint8_t* blk, float* w) {  // w: [32]; value = d * (q - 16)
  const float d = fp16Table()[loadU16(blk)];
  const uint32_t qh = loadU32(blk + 2);
  const uint8_t* qs = blk + 6;
  for (int j = 0; j < 16; ++j) {
    const int q0 = (qs[j] & 15) | static_cast<int>(((qh >> j) & 1) << 4);
    const int q1 = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
    w[j] = d * static_cast<float>(q0 - 16);
    w[j + 16] = d * static_cast<float>(q1 - 16);
  }
}

// IQ4_NL and MXFP4: value = d * table[nibble], nibbles laid out as Q4_0's.
void decodeNibbleTable(float d, const uint8_t* qs, const int8_t* table, float* w) {  // qs: [16]; w: [32]
  for (int j = 0; j < 16; ++j) {
    w[j] = d * static_cast<float>(table[qs[j] & 15]);
    w[j + 16] = d * static_cast<float>(table[qs[j] >> 4]);
  }
}

void decodeIQ4_XS(const uint8_t* blk, int k, float* w) {  // w: [32], sub-block k of the block
  const float dl = fp16Table()[loadU16(blk)] * static_cast<float>(iq4XsScale(blk, k));
  decodeNibbleTable(dl, blk + 8 + 16 * k, kIq4Values, w);
}

// Q2_K elements 32k..32k+31 (k = 4h + g): two sub-blocks of 16, each
// value = (d * sc) * q - dmin * m.
void decodeQ2_K(const uint8_t* blk, int k, float* w) {  // w: [32]
  const auto& f16 = fp16Table();
  const int h = k / 4, g = k % 4;
  const float d = f16[loadU16(blk + 80)], dmin = f16[loadU16(blk + 82)];
  const uint8_t* qs = blk + 16 + 32 * h;
  for (int half = 0; half < 2; ++half) {
    const uint8_t sc = blk[8 * h + 2 * g + half];
    const float ds = d * static_cast<float>(sc & 15);
    const float dm = dmin * static_cast<float>(sc >> 4);
    for (int l = 16 * half; l < 16 * half + 16; ++l)
      w[l] = ds * static_cast<float>((qs[l] >> (2 * g)) & 3) - dm;
  }
}

// Q3_K elements 32k..32k+31 (k = 4h + g): value = (d * (sc - 32)) * (q - 4 * !hbit).
void decodeQ3_K(const uint8_t* blk, int k, float* w) {  // w: [32]
  const int h = k / 4, g = k % 4;
  const float d = fp16Table()[loadU16(blk + 108)];
  const uint8_t* hmask = blk;
  const uint8_t* qs = blk + 32 + 32 * h;
  for (int half = 0; half < 2; ++half) {
    const float ds = d * static_cast<float>(q3KScale(blk + 96, 8 * h + 2 * g + half));
    for (int l = 16 * half; l < 16 * half + 16; ++l) {
      const int q = ((qs[l] >> (2 * g)) & 3) - (((hmask[l] >> k) & 1) ? 0 : 4);
      w[l] = ds * static_cast<float>(q);
    }
  }
}

// The grid-coded IQ types: value = (d * (m * factor)) * (g + delta / 8), as
// ggml's dequantize_row_iq* compute it (quant_grids.h).
void decodeGrid(TensorType t, const uint8_t* blk, int k, float* w) {  // w: [32], sub-block k
  grids::GridSub s;
  grids::gridSub(t, blk, k, s);
  const float d = grids::gridBlockD(t, blk), factor = grids::gridFactor(t);
  for (int l = 0; l < 4; ++l) {
    const float db = d * (static_cast<float>(s.m[l]) * factor);
    const float delta = 0.125f * static_cast<float>(s.delta[l]);
    for (int j = 8 * l; j < 8 * l + 8; ++j) w[j] = db * (static_cast<float>(s.q[j]) + delta);
  }
}

}  // namespace

void decodeChunk(TensorType t, const uint8_t* row, int64_t first, int count, float* w) {
  const int64_t b32 = first / kLanes;
  const int64_t b256 = first / kBlockQK;
  const int sub = static_cast<int>(first % kBlockQK) / kLanes;
  switch (t) {
    case TensorType::F32: decodeF32(row + 4 * first, w, count); return;
    case TensorType::F16: decodeF16(row + 2 * first, w, count); return;
    case TensorType::BF16: decodeBF16(row + 2 * first, w, count); return;
    case TensorType::Q8_0: decodeQ8_0(row + b32 * kQ8_0Bytes, w); return;
    case TensorType::Q4_0: decodeQ4_0(row + b32 * kQ4_0Bytes, w); return;
    case TensorType::Q4_1: decodeQ45_1(row + b32 * kQ4_1Bytes, false, w); return;
    case TensorType::Q5_0: decodeQ5_0(row + b32 * kQ5_0Bytes, w); return;
    case TensorType::Q5_1: decodeQ45_1(row + b32 * kQ5_1Bytes, true, w); return;
    case TensorType::IQ4_NL: {
      const uint8_t* blk = row + b32 * kIQ4_NLBytes;
      decodeNibbleTable(fp16Table()[loadU16(blk)], blk + 2, kIq4Values, w);
      return;
    }
    case TensorType::MXFP4: {
      const uint8_t* blk = row + b32 * kMXFP4Bytes;
      decodeNibbleTable(e8m0Half(blk[0]), blk + 1, kMxfp4Values, w);
      return;
    }
    case TensorType::Q2_K: decodeQ2_K(row + b256 * kQ2_KBytes, sub, w); return;
    case TensorType::Q3_K: decodeQ3_K(row + b256 * kQ3_KBytes, sub, w); return;
    case TensorType::Q4_K: decodeQ4_K(row + b256 * kQ4_KBytes, sub, w); return;
    case TensorType::Q5_K: decodeQ5_K(row + b256 * kQ5_KBytes, sub, w); return;
    case TensorType::Q6_K: decodeQ6_K(row + b256 * kQ6_KBytes, sub, w); return;
    case TensorType::IQ4_XS: decodeIQ4_XS(row + b256 * kIQ4_XSBytes, sub, w); return;
    default:
      if (!grids::isGridType(t)) throwUnsupported(t, "decode");
      decodeGrid(t, row + b256 * grids::blockBytes(t), sub, w);
  }
}

}  // namespace moe::quant::decode
