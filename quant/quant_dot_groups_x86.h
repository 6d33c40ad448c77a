// Internal to models/: the interleaved-group kernels of Q4_0 and the K-quants
// (quant_repack.h layouts), written once and compiled by each x86 instruction-set
// file (Q8_0's have a file each). The including file defines
//   MOECHAT_GROUP_KERNEL  the target attribute of its kernels
//   dotBytes(acc, u, s)   acc + the sums of four products of unsigned bytes u and
//                         signed bytes s per int32 lane (exact: every caller's
//                         products are small enough for 16-bit pair sums)
// Every lane of a 256-bit register is one row of the group, so a block's total P
// (quant_dot.h) is formed in the lane directly and a block's scaling is one vector
// fma for eight rows. Each activation's four-byte runs are broadcast from memory.
#pragma once  // (and included once per instruction-set file)

#include <immintrin.h>

#include "quant/quant_dot_x86.h"

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
// Bit `bit` of each byte of v, moved to 16 (the fifth bit of a Q5_K quant).
MOECHAT_GROUP_KERNEL inline __m256i fifthBit(__m256i v, int bit) {
  return _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(v, bit), 4), _mm256_set1_epi8(0x10));
}
// Bits shift, shift + 1 of each byte of v, moved to 16 and 32 (the high bits of a
// Q6_K quant); shift <= 6.
MOECHAT_GROUP_KERNEL inline __m256i highPair(__m256i v, int shift) {
  return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(0x03)), 4);
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

// Q4_K (kFive false) or Q5_K group by T Q8_K activations.
template <bool kFive, int T>
MOECHAT_GROUP_KERNEL void groupQ45_K(const GroupArgs& a) {
  constexpr size_t kBlock = kFive ? 1440 : 1184;
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
        const __m256i v = load32(gb + (kFive ? 416 : 160) + 256 * k + 32 * c);
        __m256i lo = lowNibbles(v), hi = highNibbles(v);
        if constexpr (kFive) {  // bits 2k and 2k + 1 of the qh bytes: 16 for sub-blocks 2k, 2k + 1
          const __m256i vh = load32(gb + 160 + 32 * c);
          lo = _mm256_or_si256(lo, fifthBit(vh, 2 * k));
          hi = _mm256_or_si256(hi, fifthBit(vh, 2 * k + 1));
        }
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

// Q6_K group by T Q8_K activations. Chunk c of half h holds, for 8 rows, 4 bytes
// of two ql runs and of the qh run: the quants of sub-blocks 4h .. 4h + 3 at
// elements 4c .. 4c + 3, read in order. Each 16-element group's sum of q * x (q =
// 0..63) has 32 times the activations' sum over it taken off, then its scale
// applied: P of quant_dot.h, exact.
template <int T>
MOECHAT_GROUP_KERNEL void groupQ6_K(const GroupArgs& a) {
  constexpr size_t kBlock = 1680;
  const int64_t nb = a.n / kBlockQK;
  __m256 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* gb = a.group + b * kBlock;
    __m256i p[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) p[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
      for (int e = 0; e < 2; ++e) {  // elements 16e .. 16e + 15 of the four sub-blocks
        __m256i sum[T][4];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) sum[t][0] = sum[t][1] = sum[t][2] = sum[t][3] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int c = 4 * e; c < 4 * e + 4; ++c) {
          const uint8_t* chunk = gb + 144 + 768 * h + 96 * c;
          const __m256i v0 = load32(chunk), v1 = load32(chunk + 32), vh = load32(chunk + 64);
          const __m256i q[4] = {_mm256_or_si256(lowNibbles(v0), highPair(vh, 0)),
                                _mm256_or_si256(lowNibbles(v1), highPair(vh, 2)),
                                _mm256_or_si256(highNibbles(v0), highPair(vh, 4)),
                                _mm256_or_si256(highNibbles(v1), highPair(vh, 6))};
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const int8_t* x = q8kQuants(a.act + t * a.act_stride + b * kQ8_KActBytes) + 128 * h + 4 * c;
#pragma GCC unroll 4
            for (int g = 0; g < 4; ++g) sum[t][g] = dotBytes(sum[t][g], q[g], broadcast4(x + 32 * g));
          }
        }
#pragma GCC unroll 4
        for (int g = 0; g < 4; ++g) {
          const int s = 2 * (4 * h + g) + e;  // the scale (and activation sum) of these 16
          const __m256i sc =
              _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(gb + 16 + 8 * s)));
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const uint8_t* sums = q8kSums(a.act + t * a.act_stride + b * kQ8_KActBytes);
            const __m256i offset = _mm256_set1_epi32(32 * loadI16(sums + 2 * s));
            p[t] = _mm256_add_epi32(p[t], _mm256_mullo_epi32(_mm256_sub_epi32(sum[t][g], offset), sc));
          }
        }
      }
    }
    const __m256 d = scales8(gb);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 dx = _mm256_set1_ps(q8kScale(a.act + t * a.act_stride + b * kQ8_KActBytes));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[t]), _mm256_mul_ps(d, dx), acc[t]);
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
  groupQ45_K<false, T>(a);
}
template <int T>
void runGroupQ5_K(const GroupArgs& a) {
  groupQ45_K<true, T>(a);
}
template <int T>
void runGroupQ6_K(const GroupArgs& a) {
  groupQ6_K<T>(a);
}

}  // namespace
}  // namespace moe::quant::dot
