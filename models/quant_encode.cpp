// The reference quantisers behind quantizeRow: Q8_0 and Q4_0 with ggml's
// reference semantics, the K-quants with simple deterministic grids (used by
// the synthetic model generator and the tests).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/quant.h"
#include "models/quant_layout.h"

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

}  // namespace

void quantizeRow(gguf::TensorType t, const float* src, uint8_t* dst, int64_t n) {
  if (!isComputeSupported(t)) throwUnsupported(t, "quantizeRow");
  checkLength(t, n, "quantizeRow");
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
    default: throwUnsupported(t, "quantizeRow");
  }
}

}  // namespace moe::quant
