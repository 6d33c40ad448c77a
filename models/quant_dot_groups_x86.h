// Internal to models/: the interleaved-group kernels (quant_repack.h layouts), written
// once and compiled by each x86 instruction-set file. The including file defines
//   MOECHAT_GROUP_KERNEL  the target attribute of its kernels
//   dotBytes(acc, u, s)   acc + the sums of four products of unsigned bytes u and
//                         signed bytes s per int32 lane (exact: every caller's
//                         products are small enough for 16-bit pair sums)
// Every lane of a 256-bit register is one row of the group, so a block's total P
// (quant_dot.h) is formed in the lane directly and a block's scaling is one vector
// fma for eight rows. Each activation's four-byte runs are broadcast from memory.
#pragma once  // (and included once per instruction-set file)

#include <immintrin.h>

#include "models/quant_dot_x86.h"

namespace moe::quant::dot {
namespace {  // each including file compiles its own copy for its instruction set

using namespace layout;
using x86::f16;
using x86::load32;

MOECHAT_GROUP_KERNEL inline __m256i lowNibbles(__m256i v) {
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}
MOECHAT_GROUP_KERNEL inline __m256i highNibbles(__m256i v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f));
}
MOECHAT_GROUP_KERNEL inline __m256i broadcast4(const int8_t* p) {
  return _mm256_set1_epi32(loadI32(reinterpret_cast<const uint8_t*>(p)));
}
MOECHAT_GROUP_KERNEL inline __m256 scales8(const uint8_t* p) {  // eight f16 -> f32
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Q4_0 group by T Q8_0 activations.
template <int T>
MOECHAT_GROUP_KERNEL void groupQ4_0(const GroupArgs& a) {
  constexpr size_t kBlock = 144;
  const int64_t nb = a.n / 32;
  __m256 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* gb = a.group + b * kBlock;
    __m256i p[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) p[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load32(gb + 16 + 32 * c);
      const __m256i lo = lowNibbles(v), hi = highNibbles(v);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const auto* x = reinterpret_cast<const int8_t*>(a.act + t * a.act_stride + b * kQ8_0ActBytes + 2);
        p[t] = dotBytes(p[t], lo, broadcast4(x + 4 * c));
        p[t] = dotBytes(p[t], hi, broadcast4(x + 16 + 4 * c));
      }
    }
    const __m256 dw = scales8(gb);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* x = a.act + t * a.act_stride;
      // The nibbles were taken as 0..15: the - 8 of every weight is 8 * (sum of x).
      const __m256i offset = _mm256_set1_epi32(8 * loadI32(q8_0Sums(x, nb) + 4 * b));
      const __m256 s = _mm256_mul_ps(dw, _mm256_set1_ps(loadF32(q8_0Scales(x, nb) + 4 * b)));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(p[t], offset)), s, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(a.y + t * a.y_stride, acc[t]);
}

// Q4_K group by T Q8_K activations.
template <int T>
MOECHAT_GROUP_KERNEL void groupQ4_K(const GroupArgs& a) {
  constexpr size_t kBlock = 1184;
  const int64_t nb = a.n / kBlockQK;
  __m256 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* gb = a.group + b * kBlock;
    __m256i p[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) p[t] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {  // sub-blocks 2k (low nibbles) and 2k + 1 (high)
      __m256i lo_sum[T], hi_sum[T];
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) lo_sum[t] = hi_sum[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int c = 0; c < 8; ++c) {
        const __m256i v = load32(gb + 160 + 256 * k + 32 * c);
        const __m256i lo = lowNibbles(v), hi = highNibbles(v);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          const int8_t* x = q8kQuants(a.act + t * a.act_stride + b * kQ8_KActBytes) + 64 * k + 4 * c;
          lo_sum[t] = dotBytes(lo_sum[t], lo, broadcast4(x));
          hi_sum[t] = dotBytes(hi_sum[t], hi, broadcast4(x + 32));
        }
      }
      const auto* sc = reinterpret_cast<const __m128i*>(gb + 32 + 16 * k);
      const __m256i sc_lo = _mm256_cvtepu8_epi32(_mm_loadl_epi64(sc));
      const __m256i sc_hi =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(gb + 40 + 16 * k)));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        p[t] = _mm256_add_epi32(p[t], _mm256_add_epi32(_mm256_mullo_epi32(lo_sum[t], sc_lo),
                                                       _mm256_mullo_epi32(hi_sum[t], sc_hi)));
    }
    const __m256 d = scales8(gb), dmin = scales8(gb + 16);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = a.act + t * a.act_stride + b * kQ8_KActBytes;
      // Sub-block sums of x as words (pairs of the sums per 16), then pairs of them
      // against each row's pair of mins.
      const auto* bs = reinterpret_cast<const __m128i*>(q8kSums(xb));
      const __m128i sums = _mm_hadd_epi16(_mm_loadu_si128(bs), _mm_loadu_si128(bs + 1));
      __m256i mn = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const __m256i mins =
            _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 96 + 16 * q)));
        mn = _mm256_add_epi32(
            mn, _mm256_madd_epi16(
                    mins, _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(sums), _mm256_set1_epi32(q))));
      }
      const __m256 dx = _mm256_set1_ps(q8kScale(xb));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[t]), _mm256_mul_ps(d, dx), acc[t]);
      const __m256 sm = _mm256_xor_ps(_mm256_mul_ps(dmin, dx), _mm256_set1_ps(-0.0f));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mn), sm, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(a.y + t * a.y_stride, acc[t]);
}

template <int T>
void runGroupQ4_0(const GroupArgs& a) {
  groupQ4_0<T>(a);
}
template <int T>
void runGroupQ4_K(const GroupArgs& a) {
  groupQ4_K<T>(a);
}

}  // namespace
}  // namespace moe::quant::dot
