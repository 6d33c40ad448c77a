// Activation quantisers, the tables of the portable dot kernels (their pairs are in
// quant_dot_portable.cpp) and the choice of instruction set.
#include "quant/quant_dot.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "quant/quant_dot_kernels.h"
#include "quant/quant_repack.h"

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
  static constexpr GroupTable q8_0 = portableGroupTableOf<TensorType::Q8_0>();
  static constexpr GroupTable q4_0 = portableGroupTableOf<TensorType::Q4_0>();
  static constexpr GroupTable q4_k = portableGroupTableOf<TensorType::Q4_K>();
  static constexpr GroupTable q5_k = portableGroupTableOf<TensorType::Q5_K>();
  static constexpr GroupTable q6_k = portableGroupTableOf<TensorType::Q6_K>();
  switch (t) {
    case TensorType::Q8_0: return &q8_0;
    case TensorType::Q4_0: return &q4_0;
    case TensorType::Q4_K: return &q4_k;
    case TensorType::Q5_K: return &q5_k;
    case TensorType::Q6_K: return &q6_k;
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
  static constexpr TileTable iq1_s = portableTableOf<TensorType::IQ1_S>();
  static constexpr TileTable iq1_m = portableTableOf<TensorType::IQ1_M>();
  static constexpr TileTable iq2_xxs = portableTableOf<TensorType::IQ2_XXS>();
  static constexpr TileTable iq2_xs = portableTableOf<TensorType::IQ2_XS>();
  static constexpr TileTable iq2_s = portableTableOf<TensorType::IQ2_S>();
  static constexpr TileTable iq3_xxs = portableTableOf<TensorType::IQ3_XXS>();
  static constexpr TileTable iq3_s = portableTableOf<TensorType::IQ3_S>();
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
    case TensorType::IQ1_S: return &iq1_s;
    case TensorType::IQ1_M: return &iq1_m;
    case TensorType::IQ2_XXS: return &iq2_xxs;
    case TensorType::IQ2_XS: return &iq2_xs;
    case TensorType::IQ2_S: return &iq2_s;
    case TensorType::IQ3_XXS: return &iq3_xxs;
    case TensorType::IQ3_S: return &iq3_s;
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
    case TensorType::IQ4_XS:
    case TensorType::IQ1_S:
    case TensorType::IQ1_M:
    case TensorType::IQ2_XXS:
    case TensorType::IQ2_XS:
    case TensorType::IQ2_S:
    case TensorType::IQ3_XXS:
    case TensorType::IQ3_S: return ActivationFormat::Q8_K;
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
