// The reference quantisers behind quantizeRow: Q8_0 and Q4_0 with ggml's
// reference semantics, the K-quants with simple deterministic grids (used by
// the synthetic model generator and the tests).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/quant.h"
#include "quant/quant_grids.h"
#include "quant/quant_layout.h"

namespace moe::quant {
namespace {

using namespace layout;

// ---------------------------------------------------------------------------
// Reference quantisers (ggml quantize_row_q8_0_ref / quantize_row_q4_0_ref semantics).

void quantizeBlockQ8_0(const float* x, uint8_t* blk) {  // x: [32]
  float amax = 0.0f;
  for (int j = 0; j < kBlockQ8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  storeU16(blk, fp32ToFp16(d));
  auto* q = reinterpret_cast<int8_t*>(blk + 2);
  for (int j = 0; j < kBlockQ8_0; ++j) q[j] = static_cast<int8_t>(std::roundf(x[j] * id));
}

void quantizeBlockQ4_0(const float* x, uint8_t* blk) {  // x: [32]
  // The signed value of largest magnitude maps to -8, so the full range [-8, 7]
  // is used on that side (ggml's choice; the other side clamps at 15).
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < kBlockQ4_0; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  storeU16(blk, fp32ToFp16(d));
  auto nibble = [id](float v) {
    const int q = static_cast<int8_t>(v * id + 8.5f);
    return static_cast<uint8_t>(std::min(15, q));
  };
  uint8_t* qs = blk + 2;
  for (int j = 0; j < kBlockQ4_0 / 2; ++j)
    qs[j] = static_cast<uint8_t>(nibble(x[j]) | (nibble(x[j + 16]) << 4));
}

// K-quant reference quantisers: simple and deterministic, not ggml's iterative
// search (make_qkx2_quants / make_qx_quants), so the bytes differ from llama.cpp's
// quantize tool; dequantise(quantise(x)) is within about one quantisation step.

// 6-bit codes of v[0..8) on the grid step = max(v) / 63, step stored as f16 (the
// decoded step is returned). A nonzero v never gets code 0.
float sixBitCodes(const float* v, int* codes) {  // v: [8], >= 0; codes: [8]
  float vmax = 0.0f;
  for (int j = 0; j < kSubBlocks; ++j) vmax = std::max(vmax, v[j]);
  const float step = fp16ToFp32(fp32ToFp16(vmax / 63.0f));
  for (int j = 0; j < kSubBlocks; ++j) {
    codes[j] = step > 0.0f ? std::clamp(static_cast<int>(std::lround(v[j] / step)), 0, 63) : 0;
    if (codes[j] == 0 && v[j] > 0.0f && step > 0.0f) codes[j] = 1;
  }
  return step;
}

// Q4_K (nmax 15) or Q5_K (nmax 31): per sub-block of 32 an affine grid from min(x, 0)
// to max(x); the 8 scales and 8 mins are 6-bit codes of f16 d and dmin.
void quantizeBlockQK_affine(const float* x, uint8_t* blk, int nmax) {  // x: [256]
  float scale[kSubBlocks], minv[kSubBlocks];
  for (int k = 0; k < kSubBlocks; ++k) {
    const float* xs = x + kLanes * k;
    float lo = 0.0f, hi = xs[0];
    for (int l = 0; l < kLanes; ++l) {
      lo = std::min(lo, xs[l]);
      hi = std::max(hi, xs[l]);
    }
    scale[k] = std::max(0.0f, hi - lo) / static_cast<float>(nmax);
    minv[k] = -lo;
  }
  int sc[kSubBlocks], m[kSubBlocks];
  const float d = sixBitCodes(scale, sc);
  const float dmin = sixBitCodes(minv, m);
  storeU16(blk, fp32ToFp16(d));
  storeU16(blk + 2, fp32ToFp16(dmin));
  packScaleMinK4(sc, m, blk + 4);
  const bool five = nmax == 31;
  uint8_t* qh = blk + 16;                // Q5_K only
  uint8_t* qs = blk + (five ? 48 : 16);  // [128]
  if (five) std::memset(qh, 0, 32);
  std::memset(qs, 0, 128);
  for (int k = 0; k < kSubBlocks; ++k) {
    const float ds = d * static_cast<float>(sc[k]);
    const float dm = dmin * static_cast<float>(m[k]);
    for (int l = 0; l < kLanes; ++l) {
      const float v = x[kLanes * k + l];
      const int q = ds > 0.0f ? std::clamp(static_cast<int>(std::lround((v + dm) / ds)), 0, nmax) : 0;
      qs[32 * (k / 2) + l] |= static_cast<uint8_t>((q & 15) << (4 * (k % 2)));
      if (five) qh[l] |= static_cast<uint8_t>((q >> 4) << k);
    }
  }
}

// Q6_K: per sub-block of 16 a symmetric grid step = amax / 31, as 8-bit codes of f16 d
// (d = largest step / 127); q = round(x / (d*sc)) in [-32, 31], stored + 32.
void quantizeBlockQ6_K(const float* x, uint8_t* blk) {  // x: [256]
  constexpr int kGroups = kBlockQK / 16;
  float step[kGroups];
  float smax = 0.0f;
  for (int j = 0; j < kGroups; ++j) {
    float amax = 0.0f;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * j + l]));
    step[j] = amax / 31.0f;
    smax = std::max(smax, step[j]);
  }
  const float d = fp16ToFp32(fp32ToFp16(smax / 127.0f));
  storeU16(blk + 208, fp32ToFp16(d));
  auto* sc = reinterpret_cast<int8_t*>(blk + 192);
  for (int j = 0; j < kGroups; ++j) {
    int c = d > 0.0f ? std::clamp(static_cast<int>(std::lround(step[j] / d)), 0, 127) : 0;
    if (c == 0 && step[j] > 0.0f && d > 0.0f) c = 1;
    sc[j] = static_cast<int8_t>(c);
  }
  std::memset(blk, 0, 192);  // ql, qh
  for (int k = 0; k < kSubBlocks; ++k) {
    const Q6Sub s = q6Sub(blk, k);
    auto* ql = const_cast<uint8_t*>(s.ql);
    auto* qh = const_cast<uint8_t*>(s.qh);
    for (int l = 0; l < kLanes; ++l) {
      const float ds = d * static_cast<float>(s.sc[l / 16]);
      const float v = x[kLanes * k + l];
      const int q = ds > 0.0f ? std::clamp(static_cast<int>(std::lround(v / ds)), -32, 31) + 32 : 32;
      ql[l] |= static_cast<uint8_t>((q & 15) << s.ql_shift);
      qh[l] |= static_cast<uint8_t>((q >> 4) << s.qh_shift);
    }
  }
}

// ---------------------------------------------------------------------------
// The types added later: ggml's reference semantics for Q4_1, Q5_0 and Q5_1
// (quantize_row_q4_1_ref, q5_0_ref, q5_1_ref); simple deterministic grids of our own
// for the rest, each within about one quantisation step of the input.

void storeU32(uint8_t* p, uint32_t v) {  // little-endian
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Q4_1 (nmax 15) and Q5_1 (nmax 31): d = (max - min) / nmax, m = min.
void quantizeBlockQ45_1(const float* x, uint8_t* blk, int nmax) {  // x: [32]
  float lo = x[0], hi = x[0];
  for (int j = 1; j < 32; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  const float d = (hi - lo) / static_cast<float>(nmax);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  storeU16(blk, fp32ToFp16(d));
  storeU16(blk + 2, fp32ToFp16(lo));
  const bool five = nmax == 31;
  uint8_t* qs = blk + (five ? 8 : 4);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(nmax, static_cast<int>((x[j] - lo) * id + 0.5f));
    const int q1 = std::min(nmax, static_cast<int>((x[j + 16] - lo) * id + 0.5f));
    qs[j] = static_cast<uint8_t>((q0 & 15) | ((q1 & 15) << 4));
    qh |= static_cast<uint32_t>(q0 >> 4) << j;
    qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
  }
  if (five) storeU32(blk + 4, qh);
}

// Q5_0: the signed value of largest magnitude maps to -16 (as Q4_0's to -8).
void quantizeBlockQ5_0(const float* x, uint8_t* blk) {  // x: [32]
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  const float d = max / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  storeU16(blk, fp32ToFp16(d));
  uint32_t qh = 0;
  uint8_t* qs = blk + 6;
  for (int j = 0; j < 16; ++j) {
    const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
    const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
    qs[j] = static_cast<uint8_t>((q0 & 15) | ((q1 & 15) << 4));
    qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
  }
  storeU32(blk + 2, qh);
}

// The index of the entry of table[16] * scale nearest to v (the first on a tie).
int nearestIndex(const int8_t* table, float scale, float v) {
  int best = 0;
  float best_err = std::fabs(v - scale * static_cast<float>(table[0]));
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(v - scale * static_cast<float>(table[i]));
    if (err < best_err) best = i, best_err = err;
  }
  return best;
}

// 32 elements as nibble indices into table[16] * scale, in the Q4_0 nibble order.
void packNearest(const float* x, const int8_t* table, float scale, uint8_t* qs) {  // x: [32]; qs: [16]
  for (int j = 0; j < 16; ++j)
    qs[j] =
        static_cast<uint8_t>(nearestIndex(table, scale, x[j]) | (nearestIndex(table, scale, x[j + 16]) << 4));
}

// The signed element of largest magnitude of x[0..n).
float signedMax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j)
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
  return max;
}

// IQ4_NL: d = max / -127, so the element of largest magnitude is table entry 0 (-127).
void quantizeBlockIQ4_NL(const float* x, uint8_t* blk) {  // x: [32]
  storeU16(blk, fp32ToFp16(signedMax(x, 32) / -127.0f));
  packNearest(x, kIq4Values, fp16ToFp32(loadU16(blk)), blk + 2);
}

// MXFP4: the smallest power-of-two scale under which the largest magnitude fits
// the e2m1 range (6, or 12 in the doubled values).
void quantizeBlockMXFP4(const float* x, uint8_t* blk) {  // x: [32]
  const float amax = std::fabs(signedMax(x, 32));
  int e = 0;
  if (amax > 0.0f) e = std::clamp(static_cast<int>(std::ceil(std::log2(amax / 12.0f))) + 128, 0, 254);
  blk[0] = static_cast<uint8_t>(e);
  packNearest(x, kMxfp4Values, e8m0Half(blk[0]), blk + 1);
}

// count non-negative values as codes 0..nmax of one step = max / nmax (stored as f16,
// the decoded step returned); a nonzero value never gets code 0.
float unsignedCodes(const float* v, int count, int nmax, int* codes) {
  float vmax = 0.0f;
  for (int j = 0; j < count; ++j) vmax = std::max(vmax, v[j]);
  const float step = fp16ToFp32(fp32ToFp16(vmax / static_cast<float>(nmax)));
  for (int j = 0; j < count; ++j) {
    codes[j] = step > 0.0f ? std::clamp(static_cast<int>(std::lround(v[j] / step)), 0, nmax) : 0;
    if (codes[j] == 0 && v[j] > 0.0f && step > 0.0f) codes[j] = 1;
  }
  return step;
}

// count signed values as codes -32..31 of one step (stored as f16, returned): the
// value of largest magnitude is code -32.
float signedCodes(const float* v, int count, int* codes) {
  const float d = fp16ToFp32(fp32ToFp16(signedMax(v, count) / -32.0f));
  for (int j = 0; j < count; ++j)
    codes[j] = d != 0.0f ? std::clamp(static_cast<int>(std::lround(v[j] / d)), -32, 31) : 0;
  return d;
}

// IQ4_XS: per sub-block of 32 the IQ4_NL scale, then the eight scales as 6-bit codes.
void quantizeBlockIQ4_XS(const float* x, uint8_t* blk) {  // x: [256]
  float sub[kSubBlocks];
  for (int k = 0; k < kSubBlocks; ++k) sub[k] = signedMax(x + kLanes * k, kLanes) / -127.0f;
  int codes[kSubBlocks];
  const float d = signedCodes(sub, kSubBlocks, codes);
  storeU16(blk, fp32ToFp16(d));
  uint16_t scales_h = 0;
  std::memset(blk + 4, 0, 4);
  for (int k = 0; k < kSubBlocks; ++k) {
    const int ls = codes[k] + 32;
    blk[4 + k / 2] |= static_cast<uint8_t>((ls & 15) << (4 * (k % 2)));
    scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * k));
  }
  storeU16(blk + 2, scales_h);
  for (int k = 0; k < kSubBlocks; ++k)
    packNearest(x + kLanes * k, kIq4Values, d * static_cast<float>(codes[k]), blk + 8 + 16 * k);
}

// Where element e (0..255) of a Q2_K / Q3_K block keeps its two low bits.
void putTwoBits(uint8_t* qs, int e, int q) {  // qs: [64]
  const int h = e / 128, g = (e % 128) / 32, l = e % 32;
  qs[32 * h + l] |= static_cast<uint8_t>((q & 3) << (2 * g));
}

// Q2_K: per sub-block of 16 an affine grid of 4 levels from min(x, 0) to max(x);
// scales and mins as 4-bit codes of f16 d and dmin.
void quantizeBlockQ2_K(const float* x, uint8_t* blk) {  // x: [256]
  constexpr int kSubs = kBlockQK / 16;
  float scale[kSubs], minv[kSubs];
  for (int k = 0; k < kSubs; ++k) {
    float lo = 0.0f, hi = x[16 * k];
    for (int l = 0; l < 16; ++l) lo = std::min(lo, x[16 * k + l]), hi = std::max(hi, x[16 * k + l]);
    scale[k] = std::max(0.0f, hi - lo) / 3.0f;
    minv[k] = -lo;
  }
  int sc[kSubs], m[kSubs];
  const float d = unsignedCodes(scale, kSubs, 15, sc);
  const float dmin = unsignedCodes(minv, kSubs, 15, m);
  for (int k = 0; k < kSubs; ++k) blk[k] = static_cast<uint8_t>(sc[k] | (m[k] << 4));
  std::memset(blk + 16, 0, 64);
  storeU16(blk + 80, fp32ToFp16(d));
  storeU16(blk + 82, fp32ToFp16(dmin));
  for (int e = 0; e < kBlockQK; ++e) {
    const float ds = d * static_cast<float>(sc[e / 16]);
    const float dm = dmin * static_cast<float>(m[e / 16]);
    putTwoBits(blk + 16, e,
               ds > 0.0f ? std::clamp(static_cast<int>(std::lround((x[e] + dm) / ds)), 0, 3) : 0);
  }
}

// Q3_K: per sub-block of 16 a symmetric grid whose largest magnitude is level -4;
// the 16 scales as signed 6-bit codes of f16 d.
void quantizeBlockQ3_K(const float* x, uint8_t* blk) {  // x: [256]
  constexpr int kSubs = kBlockQK / 16;
  float sub[kSubs];
  for (int k = 0; k < kSubs; ++k) sub[k] = signedMax(x + 16 * k, 16) / -4.0f;
  int codes[kSubs];
  const float d = signedCodes(sub, kSubs, codes);
  std::memset(blk, 0, kQ3_KBytes);
  uint8_t* scales = blk + 96;
  for (int k = 0; k < kSubs; ++k) {
    const int c = codes[k] + 32;
    scales[k % 8] |= static_cast<uint8_t>((c & 15) << (4 * (k / 8)));
    scales[8 + k % 4] |= static_cast<uint8_t>((c >> 4) << (2 * (k / 4)));
  }
  storeU16(blk + 108, fp32ToFp16(d));
  for (int e = 0; e < kBlockQK; ++e) {
    const float ds = d * static_cast<float>(codes[e / 16]);
    const int q = ds != 0.0f ? std::clamp(static_cast<int>(std::lround(x[e] / ds)), -4, 3) + 4 : 4;
    putTwoBits(blk + 32, e, q & 3);
    if (q >= 4) blk[e % 32] |= static_cast<uint8_t>(1u << (e / 32));  // hmask: bit 4h + g
  }
}

}  // namespace

void quantizeRow(gguf::TensorType t, const float* src, uint8_t* dst, int64_t n) {
  if (!isComputeSupported(t)) throwUnsupported(t, "quantizeRow");
  checkLength(t, n, "quantizeRow");
  if (grids::isGridType(t)) return grids::quantizeGridRow(t, src, dst, n);
  switch (t) {
    case TensorType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case TensorType::F16:
      for (int64_t i = 0; i < n; ++i) storeU16(dst + 2 * i, fp32ToFp16(src[i]));
      return;
    case TensorType::BF16:
      for (int64_t i = 0; i < n; ++i) storeU16(dst + 2 * i, fp32ToBf16(src[i]));
      return;
    case TensorType::Q8_0:
      for (int64_t b = 0; b < n / kBlockQ8_0; ++b)
        quantizeBlockQ8_0(src + b * kBlockQ8_0, dst + b * kQ8_0Bytes);
      return;
    case TensorType::Q4_0:
      for (int64_t b = 0; b < n / kBlockQ4_0; ++b)
        quantizeBlockQ4_0(src + b * kBlockQ4_0, dst + b * kQ4_0Bytes);
      return;
    case TensorType::Q4_K:
      for (int64_t b = 0; b < n / kBlockQK; ++b)
        quantizeBlockQK_affine(src + b * kBlockQK, dst + b * kQ4_KBytes, 15);
      return;
    case TensorType::Q5_K:
      for (int64_t b = 0; b < n / kBlockQK; ++b)
        quantizeBlockQK_affine(src + b * kBlockQK, dst + b * kQ5_KBytes, 31);
      return;
    case TensorType::Q6_K:
      for (int64_t b = 0; b < n / kBlockQK; ++b) quantizeBlockQ6_K(src + b * kBlockQK, dst + b * kQ6_KBytes);
      return;
    case TensorType::Q4_1:
      for (int64_t b = 0; b < n / 32; ++b) quantizeBlockQ45_1(src + b * 32, dst + b * kQ4_1Bytes, 15);
      return;
    case TensorType::Q5_1:
      for (int64_t b = 0; b < n / 32; ++b) quantizeBlockQ45_1(src + b * 32, dst + b * kQ5_1Bytes, 31);
      return;
    case TensorType::Q5_0:
      for (int64_t b = 0; b < n / 32; ++b) quantizeBlockQ5_0(src + b * 32, dst + b * kQ5_0Bytes);
      return;
    case TensorType::IQ4_NL:
      for (int64_t b = 0; b < n / 32; ++b) quantizeBlockIQ4_NL(src + b * 32, dst + b * kIQ4_NLBytes);
      return;
    case TensorType::MXFP4:
      for (int64_t b = 0; b < n / 32; ++b) quantizeBlockMXFP4(src + b * 32, dst + b * kMXFP4Bytes);
      return;
    case TensorType::Q2_K:
      for (int64_t b = 0; b < n / kBlockQK; ++b) quantizeBlockQ2_K(src + b * kBlockQK, dst + b * kQ2_KBytes);
      return;
    case TensorType::Q3_K:
      for (int64_t b = 0; b < n / kBlockQK; ++b) quantizeBlockQ3_K(src + b * kBlockQK, dst + b * kQ3_KBytes);
      return;
    case TensorType::IQ4_XS:
      for (int64_t b = 0; b < n / kBlockQK; ++b)
        quantizeBlockIQ4_XS(src + b * kBlockQK, dst + b * kIQ4_XSBytes);
      return;
    default: throwUnsupported(t, "quantizeRow");
  }
}

}  // namespace moe::quant
