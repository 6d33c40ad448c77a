#include "inference/delta_rule_rows.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>

#if defined(__x86_64__) || defined(_M_X64)
#define MOECHAT_DELTA_X86 1
#include <immintrin.h>
#define MOECHAT_DELTA_AVX2 __attribute__((target("avx2,fma")))
#define MOECHAT_DELTA_AVX512 __attribute__((target("avx512f,avx2,fma")))
#else
#define MOECHAT_DELTA_X86 0
#endif

namespace moe::deltanet {

namespace {

constexpr int kLanes = 16;
constexpr int kRowGroup = 4;  // rows in flight: four independent chains of multiply-adds

// The lanes' total, lane 0 first (the same code under every instruction set).
inline float sumLanes(const float* lanes) {
  float s = lanes[0];
  for (int l = 1; l < kLanes; ++l) s += lanes[l];
  return s;
}

void rowsPortable(const DeltaRowsStep& s) {
  for (int i = 0; i < s.n_rows; ++i) {
    float* row = s.state + size_t(i) * s.hk;
    float lanes[kLanes] = {};
    for (int j = 0; j < s.hk; ++j) {
      row[j] *= s.decay;
      lanes[j % kLanes] = std::fma(row[j], s.k[j], lanes[j % kLanes]);
    }
    const float delta = (s.v[i] - sumLanes(lanes)) * s.beta;
    std::fill(lanes, lanes + kLanes, 0.0f);
    for (int j = 0; j < s.hk; ++j) {
      row[j] = std::fma(s.k[j], delta, row[j]);
      lanes[j % kLanes] = std::fma(row[j], s.q[j], lanes[j % kLanes]);
    }
    s.out[i] = sumLanes(lanes);
  }
}

#if MOECHAT_DELTA_X86

// The vector kernels leave the elements past the last whole 16 (hk % 16 of them) to
// these, in the lanes' order, after the vector part.
MOECHAT_DELTA_AVX2 inline void tailDecayDot(float* row, const DeltaRowsStep& s, int from, float* lanes) {
  for (int j = from; j < s.hk; ++j) {
    row[j] *= s.decay;
    lanes[j % kLanes] = std::fma(row[j], s.k[j], lanes[j % kLanes]);
  }
}

MOECHAT_DELTA_AVX2 inline void tailUpdateDot(float* row, const DeltaRowsStep& s, int from, float delta,
                                             float* lanes) {
  for (int j = from; j < s.hk; ++j) {
    row[j] = std::fma(s.k[j], delta, row[j]);
    lanes[j % kLanes] = std::fma(row[j], s.q[j], lanes[j % kLanes]);
  }
}

template <int NR>
MOECHAT_DELTA_AVX512 inline void groupAvx512(const DeltaRowsStep& s, int i0) {
  const int full = s.hk - s.hk % kLanes;
  float* row[NR];
  __m512 acc[NR];
  for (int r = 0; r < NR; ++r) row[r] = s.state + size_t(i0 + r) * s.hk, acc[r] = _mm512_setzero_ps();
  const __m512 decay = _mm512_set1_ps(s.decay);
  for (int j = 0; j < full; j += kLanes) {
    const __m512 k = _mm512_loadu_ps(s.k + j);
    for (int r = 0; r < NR; ++r) {
      const __m512 x = _mm512_mul_ps(_mm512_loadu_ps(row[r] + j), decay);
      _mm512_storeu_ps(row[r] + j, x);
      acc[r] = _mm512_fmadd_ps(x, k, acc[r]);
    }
  }
  __m512 delta[NR];
  float d[NR];
  alignas(64) float lanes[kLanes];
  for (int r = 0; r < NR; ++r) {
    _mm512_store_ps(lanes, acc[r]);
    tailDecayDot(row[r], s, full, lanes);
    d[r] = (s.v[i0 + r] - sumLanes(lanes)) * s.beta;
    delta[r] = _mm512_set1_ps(d[r]);
    acc[r] = _mm512_setzero_ps();
  }
  for (int j = 0; j < full; j += kLanes) {
    const __m512 k = _mm512_loadu_ps(s.k + j), q = _mm512_loadu_ps(s.q + j);
    for (int r = 0; r < NR; ++r) {
      const __m512 x = _mm512_fmadd_ps(k, delta[r], _mm512_loadu_ps(row[r] + j));
      _mm512_storeu_ps(row[r] + j, x);
      acc[r] = _mm512_fmadd_ps(x, q, acc[r]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    _mm512_store_ps(lanes, acc[r]);
    tailUpdateDot(row[r], s, full, d[r], lanes);
    s.out[i0 + r] = sumLanes(lanes);
  }
}

MOECHAT_DELTA_AVX512 void rowsAvx512(const DeltaRowsStep& s) {
  int i = 0;
  for (; i + kRowGroup <= s.n_rows; i += kRowGroup) groupAvx512<kRowGroup>(s, i);
  for (; i < s.n_rows; ++i) groupAvx512<1>(s, i);
}

// Lanes 0..7 of a group of 16 in lo, 8..15 in hi.
template <int NR>
MOECHAT_DELTA_AVX2 inline void groupAvx2(const DeltaRowsStep& s, int i0) {
  const int full = s.hk - s.hk % kLanes;
  float* row[NR];
  __m256 lo[NR], hi[NR];
  for (int r = 0; r < NR; ++r)
    row[r] = s.state + size_t(i0 + r) * s.hk, lo[r] = _mm256_setzero_ps(), hi[r] = _mm256_setzero_ps();
  const __m256 decay = _mm256_set1_ps(s.decay);
  for (int j = 0; j < full; j += kLanes) {
    const __m256 k0 = _mm256_loadu_ps(s.k + j), k1 = _mm256_loadu_ps(s.k + j + 8);
    for (int r = 0; r < NR; ++r) {
      const __m256 x0 = _mm256_mul_ps(_mm256_loadu_ps(row[r] + j), decay);
      const __m256 x1 = _mm256_mul_ps(_mm256_loadu_ps(row[r] + j + 8), decay);
      _mm256_storeu_ps(row[r] + j, x0);
      _mm256_storeu_ps(row[r] + j + 8, x1);
      lo[r] = _mm256_fmadd_ps(x0, k0, lo[r]);
      hi[r] = _mm256_fmadd_ps(x1, k1, hi[r]);
    }
  }
  __m256 delta[NR];
  float d[NR];
  alignas(32) float lanes[kLanes];
  for (int r = 0; r < NR; ++r) {
    _mm256_store_ps(lanes, lo[r]);
    _mm256_store_ps(lanes + 8, hi[r]);
    tailDecayDot(row[r], s, full, lanes);
    d[r] = (s.v[i0 + r] - sumLanes(lanes)) * s.beta;
    delta[r] = _mm256_set1_ps(d[r]);
    lo[r] = _mm256_setzero_ps(), hi[r] = _mm256_setzero_ps();
  }
  for (int j = 0; j < full; j += kLanes) {
    const __m256 k0 = _mm256_loadu_ps(s.k + j), k1 = _mm256_loadu_ps(s.k + j + 8);
    const __m256 q0 = _mm256_loadu_ps(s.q + j), q1 = _mm256_loadu_ps(s.q + j + 8);
    for (int r = 0; r < NR; ++r) {
      const __m256 x0 = _mm256_fmadd_ps(k0, delta[r], _mm256_loadu_ps(row[r] + j));
      const __m256 x1 = _mm256_fmadd_ps(k1, delta[r], _mm256_loadu_ps(row[r] + j + 8));
      _mm256_storeu_ps(row[r] + j, x0);
      _mm256_storeu_ps(row[r] + j + 8, x1);
      lo[r] = _mm256_fmadd_ps(x0, q0, lo[r]);
      hi[r] = _mm256_fmadd_ps(x1, q1, hi[r]);
    }
  }
  for (int r = 0; r < NR; ++r) {
    _mm256_store_ps(lanes, lo[r]);
    _mm256_store_ps(lanes + 8, hi[r]);
    tailUpdateDot(row[r], s, full, d[r], lanes);
    s.out[i0 + r] = sumLanes(lanes);
  }
}

MOECHAT_DELTA_AVX2 void rowsAvx2(const DeltaRowsStep& s) {
  int i = 0;
  for (; i + kRowGroup <= s.n_rows; i += kRowGroup) groupAvx2<kRowGroup>(s, i);
  for (; i < s.n_rows; ++i) groupAvx2<1>(s, i);
}

#endif  // MOECHAT_DELTA_X86

}  // namespace

void deltaRows(quant::DotIsa isa, const DeltaRowsStep& s) {
  if (!quant::dotIsaAvailable(isa))
    throw std::invalid_argument(std::string("deltaRows: ") + quant::dotIsaName(isa) +
                                " is not available here");
  switch (isa) {
#if MOECHAT_DELTA_X86
    case quant::DotIsa::Avx512: return rowsAvx512(s);
    case quant::DotIsa::Avx2: return rowsAvx2(s);
#endif
    default: return rowsPortable(s);
  }
}

void deltaRows(const DeltaRowsStep& s) {
  static const quant::DotIsa best = quant::bestDotIsa();
  deltaRows(best, s);
}

}  // namespace moe::deltanet
