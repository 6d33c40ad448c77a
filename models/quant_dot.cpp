// Activation quantisers, the portable dot kernels (the definition the SIMD kernels
// are tested against bit for bit) and the choice of instruction set.
#include "models/quant_dot.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/quant.h"
#include "models/quant_dot_kernels.h"
#include "models/quant_repack.h"

namespace moe::quant {
namespace {

using gguf::TensorType;
using namespace layout;
using namespace dot;

// ---------------------------------------------------------------------------
// Activation quantisers. Rounding: to nearest, ties to even, through the 1.5 * 2^23
// trick (exact for |v| <= 2^22; here |v| <= 127.5): the same result as nearbyint in
// the default mode, without a libm call per element, and the loops vectorise.

inline float roundHalfEven(float v) { return (v + 0x1.8p23f) - 0x1.8p23f; }

float absMax(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

void quantizeQ8_0Block(const float* x, uint8_t* blk) {  // x: [32]
  const float d = absMax(x, 32) / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  storeU16(blk, fp32ToFp16(d));
  auto* q = reinterpret_cast<int8_t*>(blk + 2);
  for (int j = 0; j < 32; ++j) q[j] = static_cast<int8_t>(roundHalfEven(x[j] * id));
}

void quantizeQ8_KBlock(const float* x, uint8_t* blk) {  // x: [256]
  const float amax = absMax(x, kBlockQK);
  auto* q = reinterpret_cast<int8_t*>(blk + 4);
  float d = 0.0f;
  if (amax != 0.0f) {
    int first = 0;  // the first element of largest magnitude gives the sign
    while (std::fabs(x[first]) != amax) ++first;
    const float iscale = -127.0f / x[first];
    for (int j = 0; j < kBlockQK; ++j)
      q[j] = static_cast<int8_t>(std::min(127.0f, roundHalfEven(iscale * x[j])));
    d = 1.0f / iscale;
  } else {
    std::memset(q, 0, kBlockQK);
  }
  std::memcpy(blk, &d, sizeof d);
  for (int g = 0; g < 16; ++g) {
    int s = 0;
    for (int j = 0; j < 16; ++j) s += q[16 * g + j];
    const auto s16 = static_cast<int16_t>(s);
    std::memcpy(blk + 260 + 2 * g, &s16, sizeof s16);
  }
}

// The tail of a Q8_0 activation row: each block's d as f32 and its sum of q.
void appendQ8_0Tail(int64_t nb, uint8_t* act) {
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = act + b * kQ8_0ActBytes;
    const float d = fp16ToFp32(loadU16(blk));
    int32_t sum = 0;
    for (int j = 0; j < 32; ++j) sum += static_cast<int8_t>(blk[2 + j]);
    std::memcpy(act + nb * kQ8_0ActBytes + 4 * b, &d, 4);
    std::memcpy(act + nb * (kQ8_0ActBytes + 4) + 4 * b, &sum, 4);
  }
}

// ---------------------------------------------------------------------------
// Portable kernels: one (row, activation) pair at a time, exactly as quant_dot.h
// defines the sum.

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
    default: throwUnsupported(t, "dotTile");
  }
}

template <TensorType Type, int T>
void portableTile(const TileArgs& a) {
  for (int t = 0; t < T; ++t) a.y[t * a.y_stride] = pairPortable(Type, a.row, a.act + t * a.act_stride, a.n);
}

template <TensorType Type>
constexpr TileTable portableTableOf() {
  return {{portableTile<Type, 1>, portableTile<Type, 2>, portableTile<Type, 4>, portableTile<Type, 8>}};
}

// A group's rows back in the file layout, then each pair as above.
template <TensorType Type, int T>
void portableGroup(const GroupArgs& a) {
  const size_t row_bytes = gguf::rowBytes(Type, static_cast<uint64_t>(a.n));
  thread_local std::vector<uint8_t> rows;
  if (rows.size() < row_bytes) rows.resize(row_bytes);
  for (int r = 0; r < kRowGroup; ++r) {
    unpackRow(Type, a.group, a.n, r, rows.data());
    for (int t = 0; t < T; ++t)
      a.y[t * a.y_stride + r] = pairPortable(Type, rows.data(), a.act + t * a.act_stride, a.n);
  }
}

template <TensorType Type>
constexpr GroupTable portableGroupTableOf() {
  return {{portableGroup<Type, 1>, portableGroup<Type, 2>, portableGroup<Type, 4>, portableGroup<Type, 8>}};
}

const TileTable* tableFor(DotIsa isa, TensorType t) {
  switch (isa) {
    case DotIsa::Portable: return portableTable(t);
    case DotIsa::Avx2:
      if (!cpuHasAvx2()) return nullptr;
      return avx2Table(t) ? avx2Table(t) : portableTable(t);
    case DotIsa::Avx512:
      if (!cpuHasAvx512()) return nullptr;
      return avx512Table(t) ? avx512Table(t) : tableFor(DotIsa::Avx2, t);
  }
  return nullptr;
}

const GroupTable* groupTableFor(DotIsa isa, TensorType t) {
  switch (isa) {
    case DotIsa::Portable: return portableGroupTable(t);
    case DotIsa::Avx2: return cpuHasAvx2() ? avx2GroupTable(t) : nullptr;
    case DotIsa::Avx512: return cpuHasAvx512() ? avx512GroupTable(t) : nullptr;
  }
  return nullptr;
}

}  // namespace

namespace dot {
const GroupTable* portableGroupTable(TensorType t) {
  static constexpr GroupTable q4_0 = portableGroupTableOf<TensorType::Q4_0>();
  static constexpr GroupTable q4_k = portableGroupTableOf<TensorType::Q4_K>();
  switch (t) {
    case TensorType::Q4_0: return &q4_0;
    case TensorType::Q4_K: return &q4_k;
    default: return nullptr;
  }
}

const TileTable* portableTable(TensorType t) {
  static constexpr TileTable q8_0 = portableTableOf<TensorType::Q8_0>();
  static constexpr TileTable q4_0 = portableTableOf<TensorType::Q4_0>();
  static constexpr TileTable q4_k = portableTableOf<TensorType::Q4_K>();
  static constexpr TileTable q5_k = portableTableOf<TensorType::Q5_K>();
  static constexpr TileTable q6_k = portableTableOf<TensorType::Q6_K>();
  static constexpr TileTable q4_1 = portableTableOf<TensorType::Q4_1>();
  static constexpr TileTable q5_0 = portableTableOf<TensorType::Q5_0>();
  static constexpr TileTable q5_1 = portableTableOf<TensorType::Q5_1>();
  static constexpr TileTable iq4_nl = portableTableOf<TensorType::IQ4_NL>();
  static constexpr TileTable mxfp4 = portableTableOf<TensorType::MXFP4>();
  static constexpr TileTable q2_k = portableTableOf<TensorType::Q2_K>();
  static constexpr TileTable q3_k = portableTableOf<TensorType::Q3_K>();
  static constexpr TileTable iq4_xs = portableTableOf<TensorType::IQ4_XS>();
  switch (t) {
    case TensorType::Q8_0: return &q8_0;
    case TensorType::Q4_0: return &q4_0;
    case TensorType::Q4_K: return &q4_k;
    case TensorType::Q5_K: return &q5_k;
    case TensorType::Q6_K: return &q6_k;
    case TensorType::Q4_1: return &q4_1;
    case TensorType::Q5_0: return &q5_0;
    case TensorType::Q5_1: return &q5_1;
    case TensorType::IQ4_NL: return &iq4_nl;
    case TensorType::MXFP4: return &mxfp4;
    case TensorType::Q2_K: return &q2_k;
    case TensorType::Q3_K: return &q3_k;
    case TensorType::IQ4_XS: return &iq4_xs;
    default: return nullptr;
  }
}
}  // namespace dot

ActivationFormat activationFormat(gguf::TensorType weights) {
  switch (weights) {
    case TensorType::F32:
    case TensorType::F16:
    case TensorType::BF16: return ActivationFormat::None;
    case TensorType::Q8_0:
    case TensorType::Q4_0:
    case TensorType::Q4_1:
    case TensorType::Q5_0:
    case TensorType::Q5_1:
    case TensorType::IQ4_NL:
    case TensorType::MXFP4: return ActivationFormat::Q8_0;
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q6_K:
    case TensorType::Q2_K:
    case TensorType::Q3_K:
    case TensorType::IQ4_XS: return ActivationFormat::Q8_K;
    default: throwUnsupported(weights, "activationFormat");
  }
}

size_t activationRowBytes(ActivationFormat f, int64_t n) {
  switch (f) {
    case ActivationFormat::None: return static_cast<size_t>(n) * sizeof(float);
    case ActivationFormat::Q8_0: return static_cast<size_t>(n / 32) * (kQ8_0ActBytes + 8);
    case ActivationFormat::Q8_K: return static_cast<size_t>(n / kBlockQK) * kQ8_KActBytes;
  }
  return 0;
}

void quantizeActivations(ActivationFormat f, const float* x, int64_t n, uint8_t* dst) {
  quantizeActivations(bestDotIsa(), f, x, n, dst);
}

void quantizeActivations(DotIsa isa, ActivationFormat f, const float* x, int64_t n, uint8_t* dst) {
  const bool avx2 = isa != DotIsa::Portable && cpuHasAvx2();
  switch (f) {
    case ActivationFormat::None: std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float)); return;
    case ActivationFormat::Q8_0:
      if (n % 32) throw std::invalid_argument("quantizeActivations: Q8_0 rows are whole blocks of 32");
      if (avx2) return quantizeQ8_0Avx2(x, n / 32, dst);
      for (int64_t b = 0; b < n / 32; ++b) quantizeQ8_0Block(x + 32 * b, dst + b * kQ8_0ActBytes);
      appendQ8_0Tail(n / 32, dst);
      return;
    case ActivationFormat::Q8_K:
      if (n % kBlockQK) throw std::invalid_argument("quantizeActivations: Q8_K rows are whole blocks of 256");
      if (avx2) return quantizeQ8_KAvx2(x, n / kBlockQK, dst);
      for (int64_t b = 0; b < n / kBlockQK; ++b) quantizeQ8_KBlock(x + kBlockQK * b, dst + b * kQ8_KActBytes);
      return;
  }
}

bool dotIsaAvailable(DotIsa isa) { return tableFor(isa, TensorType::Q8_0) != nullptr; }

DotIsa bestDotIsa() {
  static const DotIsa best = dotIsaAvailable(DotIsa::Avx512) ? DotIsa::Avx512
                             : dotIsaAvailable(DotIsa::Avx2) ? DotIsa::Avx2
                                                             : DotIsa::Portable;
  return best;
}

const char* dotIsaName(DotIsa isa) {
  switch (isa) {
    case DotIsa::Portable: return "portable";
    case DotIsa::Avx2: return "avx2";
    case DotIsa::Avx512: return "avx512-vnni";
  }
  return "?";
}

void dotTile(DotIsa isa, gguf::TensorType t, const uint8_t* rows, size_t row_bytes, int nr,
             const uint8_t* act, size_t act_stride, int nt, int64_t n, float* y, size_t y_stride) {
  if (activationFormat(t) == ActivationFormat::None) throwUnsupported(t, "dotTile (a float type)");
  checkLength(t, n, "dotTile");
  const TileTable* table = tableFor(isa, t);
  if (!table)
    throw std::invalid_argument(std::string("dotTile: the ") + dotIsaName(isa) +
                                " kernels cannot run on this CPU or build");
  if (nr <= 0 || nt <= 0) return;
  runTiles(*table, TileArgs{rows, row_bytes, act, act_stride, n, y, y_stride}, nr, nt);
}

void dotGroups(DotIsa isa, gguf::TensorType t, const uint8_t* groups, size_t group_bytes, int ngroups,
               const uint8_t* act, size_t act_stride, int nt, int64_t n, float* y, size_t y_stride) {
  if (!isRepackable(t)) throwUnsupported(t, "dotGroups (no interleaved layout)");
  checkLength(t, n, "dotGroups");
  const GroupTable* table = groupTableFor(isa, t);
  if (!table)
    throw std::invalid_argument(std::string("dotGroups: the ") + dotIsaName(isa) +
                                " kernels cannot run on this CPU or build");
  if (ngroups <= 0 || nt <= 0) return;
  runGroups(*table, GroupArgs{groups, act, act_stride, n, y, y_stride}, group_bytes, ngroups, nt);
}

float dotQuantized(DotIsa isa, gguf::TensorType t, const uint8_t* row, const uint8_t* act, int64_t n) {
  float y = 0.0f;
  dotTile(isa, t, row, 0, 1, act, 0, 1, n, &y, 0);
  return y;
}

}  // namespace moe::quant
