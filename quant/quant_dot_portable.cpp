// The portable dot kernels: one (row, activation) pair at a time, exactly as
// quant_dot.h defines each type's sum. They are the definition the SIMD kernels are
// tested against bit for bit, and run where an instruction set has no kernel of its own.
#include <cmath>

#include "quant/quant.h"
#include "quant/quant_dot_kernels.h"
#include "quant/quant_grids.h"

namespace moe::quant::dot {
namespace {

using namespace layout;

using Lanes = float[8];

void dotQ8_0Block(const int8_t* w, float dw, const uint8_t* xb, Lanes acc) {  // w: [32]
  const float s = dw * fp16ToFp32(loadU16(xb));
  const auto* x = reinterpret_cast<const int8_t*>(xb + 2);
  for (int l = 0; l < 8; ++l) {
    int p = 0;
    for (int i = 4 * l; i < 4 * l + 4; ++i) p += w[i] * x[i];
    acc[l] = std::fma(s, static_cast<float>(p), acc[l]);
  }
}

float pairQ8_0(const uint8_t* row, const uint8_t* act, int64_t n) {
  Lanes acc = {};
  for (int64_t b = 0; b < n / 32; ++b) {
    const uint8_t* wb = row + b * kQ8_0Bytes;
    dotQ8_0Block(reinterpret_cast<const int8_t*>(wb + 2), fp16ToFp32(loadU16(wb)), act + b * kQ8_0ActBytes,
                 acc);
  }
  return reduceLanes(acc);
}

float pairQ4_0(const uint8_t* row, const uint8_t* act, int64_t n) {
  const int64_t nb = n / 32;
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * kQ4_0Bytes;
    const auto* x = reinterpret_cast<const int8_t*>(act + b * kQ8_0ActBytes + 2);
    int32_t p = 0;
    for (int j = 0; j < 16; ++j) p += ((wb[2 + j] & 15) - 8) * x[j] + ((wb[2 + j] >> 4) - 8) * x[j + 16];
    const float s = fp16ToFp32(loadU16(wb)) * loadF32(q8_0Scales(act, nb) + 4 * b);
    acc = std::fma(static_cast<float>(p), s, acc);
  }
  return acc;
}

// Q4_K (qh == nullptr) and Q5_K: the 4-bit nibbles at qs, the fifth bit in qh.
float pairQ45_K(const uint8_t* row, const uint8_t* act, int64_t n, bool five) {
  float acc = 0.0f;
  const int bytes = five ? kQ5_KBytes : kQ4_KBytes;
  for (int64_t b = 0; b < n / kBlockQK; ++b) {
    const uint8_t* wb = row + b * bytes;
    const uint8_t* xb = act + b * kQ8_KActBytes;
    const uint8_t* qh = five ? wb + 16 : nullptr;
    const uint8_t* qs = wb + (five ? 48 : 16);
    const int8_t* x = q8kQuants(xb);
    int32_t p[8] = {}, mn[8] = {};
    for (int j = 0; j < kSubBlocks; ++j) {
      int sc = 0, m = 0;
      scaleMinK4(wb + 4, j, sc, m);
      for (int l = 0; l < 8; ++l) {
        int s = 0;
        for (int i = 4 * l; i < 4 * l + 4; ++i) {
          int q = (qs[32 * (j / 2) + i] >> (4 * (j % 2))) & 15;
          if (qh) q |= ((qh[i] >> j) & 1) << 4;
          s += q * x[32 * j + i];
        }
        p[l] += sc * s;
      }
      const int sum = loadI16(q8kSums(xb) + 4 * j) + loadI16(q8kSums(xb) + 4 * j + 2);
      mn[j] = m * sum;
    }
    int32_t total = 0, total_mins = 0;
    for (int l = 0; l < 8; ++l) total += p[l], total_mins += mn[l];
    const float dx = q8kScale(xb);
    const float s = fp16ToFp32(loadU16(wb)) * dx;
    const float sm = -(fp16ToFp32(loadU16(wb + 2)) * dx);
    acc = std::fma(static_cast<float>(total), s, acc);
    acc = std::fma(static_cast<float>(total_mins), sm, acc);
  }
  return acc;
}

float pairQ6_K(const uint8_t* row, const uint8_t* act, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kBlockQK; ++b) {
    const uint8_t* wb = row + b * kQ6_KBytes;
    const uint8_t* xb = act + b * kQ8_KActBytes;
    const int8_t* x = q8kQuants(xb);
    const auto* scales = reinterpret_cast<const int8_t*>(wb + 192);
    int32_t p[8] = {};
    for (int j = 0; j < kSubBlocks; ++j) {
      const Q6Sub sub = q6Sub(wb, j);
      for (int l = 0; l < 8; ++l) {
        int s = 0;
        for (int i = 4 * l; i < 4 * l + 4; ++i) {
          const int q = ((sub.ql[i] >> sub.ql_shift) & 15) | (((sub.qh[i] >> sub.qh_shift) & 3) << 4);
          s += q * x[32 * j + i];
        }
        p[l] += sub.sc[l / 4] * s;
      }
    }
    for (int l = 0; l < 8; ++l)
      p[l] -= 32 * (scales[2 * l] * loadI16(q8kSums(xb) + 4 * l) +
                    scales[2 * l + 1] * loadI16(q8kSums(xb) + 4 * l + 2));
    int32_t total = 0;
    for (int l = 0; l < 8; ++l) total += p[l];
    const float s = fp16ToFp32(loadU16(wb + 208)) * q8kScale(xb);
    acc = std::fma(static_cast<float>(total), s, acc);
  }
  return acc;
}

// Q5_0, IQ4_NL and MXFP4: per block the exact total of value(nibble) * x, then one fma
// with the block scale times the activation's.
float blockScale(TensorType t, const uint8_t* wb) {
  return t == TensorType::MXFP4 ? e8m0Half(wb[0]) : fp16ToFp32(loadU16(wb));
}

template <TensorType Type>
int signedWeight(const uint8_t* wb, int j) {  // element j (0..31) as an integer
  const int half = j / 16, i = j % 16;
  if constexpr (Type == TensorType::Q5_0) {
    const uint8_t* qh = wb + 2;
    const int nib = half ? wb[6 + i] >> 4 : wb[6 + i] & 15;
    return (nib | (((qh[j / 8] >> (j % 8)) & 1) << 4)) - 16;
  } else if constexpr (Type == TensorType::IQ4_NL) {
    return kIq4Values[half ? wb[2 + i] >> 4 : wb[2 + i] & 15];
  } else {
    return kMxfp4Values[half ? wb[1 + i] >> 4 : wb[1 + i] & 15];
  }
}

template <TensorType Type, int kBytes>
float pairTotals32(const uint8_t* row, const uint8_t* act, int64_t n) {
  const int64_t nb = n / 32;
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * kBytes;
    const auto* x = reinterpret_cast<const int8_t*>(act + b * kQ8_0ActBytes + 2);
    int32_t p = 0;
    for (int j = 0; j < 32; ++j) p += signedWeight<Type>(wb, j) * x[j];
    acc = std::fma(static_cast<float>(p), blockScale(Type, wb) * loadF32(q8_0Scales(act, nb) + 4 * b), acc);
  }
  return acc;
}

// Q4_1 / Q5_1: per block P = sum of q * x and the activation's sum S of x, then
// acc = fma(P, d * dx, acc), acc = fma(S, m * dx, acc).
float pairQ45_1(const uint8_t* row, const uint8_t* act, int64_t n, bool five) {
  const int64_t nb = n / 32;
  const int bytes = five ? kQ5_1Bytes : kQ4_1Bytes;
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb = row + b * bytes;
    const uint8_t* qh = wb + 4;  // Q5_1 only
    const uint8_t* qs = wb + (five ? 8 : 4);
    const auto* x = reinterpret_cast<const int8_t*>(act + b * kQ8_0ActBytes + 2);
    int32_t p = 0;
    for (int j = 0; j < 32; ++j) {
      int q = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
      if (five) q |= ((qh[j / 8] >> (j % 8)) & 1) << 4;
      p += q * x[j];
    }
    const float dx = loadF32(q8_0Scales(act, nb) + 4 * b);
    acc = std::fma(static_cast<float>(p), fp16ToFp32(loadU16(wb)) * dx, acc);
    acc = std::fma(static_cast<float>(loadI32(q8_0Sums(act, nb) + 4 * b)), fp16ToFp32(loadU16(wb + 2)) * dx,
                   acc);
  }
  return acc;
}

// Q2_K: P = sum over the 16 sub-blocks k of sc_k * (sum of q * x), M = sum of m_k
// times the activation's sum over sub-block k; acc = fma(P, d*dx, acc), then
// acc = fma(M, -(dmin*dx), acc).
float pairQ2_K(const uint8_t* row, const uint8_t* act, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kBlockQK; ++b) {
    const uint8_t* wb = row + b * kQ2_KBytes;
    const uint8_t* xb = act + b * kQ8_KActBytes;
    const int8_t* x = q8kQuants(xb);
    int32_t p = 0, mins = 0;
    for (int k = 0; k < 16; ++k) {
      int s = 0;
      for (int e = 16 * k; e < 16 * k + 16; ++e)
        s += ((wb[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3) * x[e];
      p += (wb[k] & 15) * s;
      mins += (wb[k] >> 4) * loadI16(q8kSums(xb) + 2 * k);
    }
    const float dx = q8kScale(xb);
    acc = std::fma(static_cast<float>(p), fp16ToFp32(loadU16(wb + 80)) * dx, acc);
    acc = std::fma(static_cast<float>(mins), -(fp16ToFp32(loadU16(wb + 82)) * dx), acc);
  }
  return acc;
}

// Q3_K: P = sum over the 16 sub-blocks k of (sc_k - 32) * (sum of q * x), q in -4..3;
// acc = fma(P, d*dx, acc).
float pairQ3_K(const uint8_t* row, const uint8_t* act, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kBlockQK; ++b) {
    const uint8_t* wb = row + b * kQ3_KBytes;
    const uint8_t* xb = act + b * kQ8_KActBytes;
    const int8_t* x = q8kQuants(xb);
    int32_t p = 0;
    for (int k = 0; k < 16; ++k) {
      int s = 0;
      for (int e = 16 * k; e < 16 * k + 16; ++e) {
        const int low = (wb[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        s += (low - (((wb[e % 32] >> (e / 32)) & 1) ? 0 : 4)) * x[e];
      }
      p += q3KScale(wb + 96, k) * s;
    }
    acc = std::fma(static_cast<float>(p), fp16ToFp32(loadU16(wb + 108)) * q8kScale(xb), acc);
  }
  return acc;
}

// IQ4_XS: P = sum over the 8 sub-blocks k of (ls_k - 32) * (sum of value(nibble) * x);
// acc = fma(P, d*dx, acc).
float pairIQ4_XS(const uint8_t* row, const uint8_t* act, int64_t n) {
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kBlockQK; ++b) {
    const uint8_t* wb = row + b * kIQ4_XSBytes;
    const uint8_t* xb = act + b * kQ8_KActBytes;
    const int8_t* x = q8kQuants(xb);
    int32_t p = 0;
    for (int k = 0; k < kSubBlocks; ++k) {
      const uint8_t* qs = wb + 8 + 16 * k;
      int s = 0;
      for (int j = 0; j < 16; ++j)
        s += kIq4Values[qs[j] & 15] * x[32 * k + j] + kIq4Values[qs[j] >> 4] * x[32 * k + j + 16];
      p += iq4XsScale(wb, k) * s;
    }
    acc = std::fma(static_cast<float>(p), fp16ToFp32(loadU16(wb)) * q8kScale(xb), acc);
  }
  return acc;
}

// The grid-coded IQ types: P = sum over the groups g of 8 of m_g * (sum of q * x)
// (IQ1_*: m_g * (8 * sum of q * x + delta_g * sum of x)); acc = fma(P, (d*f) * dx, acc)
// with f the type's factor (IQ1_*: 1/8).
float pairGrid(TensorType t, const uint8_t* row, const uint8_t* act, int64_t n) {
  const int bytes = grids::blockBytes(t);
  const bool iq1 = t == TensorType::IQ1_S || t == TensorType::IQ1_M;
  const float factor = iq1 ? 0.125f : grids::gridFactor(t);
  float acc = 0.0f;
  grids::GridSub s;
  for (int64_t b = 0; b < n / kBlockQK; ++b) {
    const uint8_t* wb = row + b * bytes;
    const uint8_t* xb = act + b * kQ8_KActBytes;
    const int8_t* x = q8kQuants(xb);
    int32_t p = 0;
    for (int k = 0; k < kSubBlocks; ++k) {
      grids::gridSub(t, wb, k, s);
      for (int l = 0; l < 4; ++l) {
        const int8_t* xg = x + 32 * k + 8 * l;
        int32_t sum = 0, sum_x = 0;
        for (int j = 0; j < 8; ++j) sum += s.q[8 * l + j] * xg[j], sum_x += xg[j];
        p += s.m[l] * (iq1 ? 8 * sum + s.delta[l] * sum_x : sum);
      }
    }
    acc = std::fma(static_cast<float>(p), (grids::gridBlockD(t, wb) * factor) * q8kScale(xb), acc);
  }
  return acc;
}

}  // namespace

float pairPortable(TensorType t, const uint8_t* row, const uint8_t* act, int64_t n) {
  switch (t) {
    case TensorType::Q8_0: return pairQ8_0(row, act, n);
    case TensorType::Q4_0: return pairQ4_0(row, act, n);
    case TensorType::Q4_K: return pairQ45_K(row, act, n, false);
    case TensorType::Q5_K: return pairQ45_K(row, act, n, true);
    case TensorType::Q6_K: return pairQ6_K(row, act, n);
    case TensorType::Q4_1: return pairQ45_1(row, act, n, false);
    case TensorType::Q5_1: return pairQ45_1(row, act, n, true);
    case TensorType::Q5_0: return pairTotals32<TensorType::Q5_0, kQ5_0Bytes>(row, act, n);
    case TensorType::IQ4_NL: return pairTotals32<TensorType::IQ4_NL, kIQ4_NLBytes>(row, act, n);
    case TensorType::MXFP4: return pairTotals32<TensorType::MXFP4, kMXFP4Bytes>(row, act, n);
    case TensorType::Q2_K: return pairQ2_K(row, act, n);
    case TensorType::Q3_K: return pairQ3_K(row, act, n);
    case TensorType::IQ4_XS: return pairIQ4_XS(row, act, n);
    default:
      if (!grids::isGridType(t)) throwUnsupported(t, "dotTile");
      return pairGrid(t, row, act, n);
  }
}

}  // namespace moe::quant::dot
