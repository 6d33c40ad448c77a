// Internal to models/: the AVX2-level helpers the AVX2 and AVX-512 dot kernels share
// (an AVX2-target inline function may be inlined into an AVX-512 kernel, whose
// target includes AVX2, FMA and F16C). x86 only.
#pragma once

#include <immintrin.h>

#include "quant/quant_dot_kernels.h"

#define MOECHAT_AVX2 __attribute__((target("avx2,fma,f16c")))
#define MOECHAT_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace moe::quant::dot::x86 {

using namespace layout;

MOECHAT_AVX2_INLINE float reduce8(__m256 acc) {  // the order of reduceLanes
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// The exact int32 sum of v's lanes.
MOECHAT_AVX2_INLINE int32_t sumLanes(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// fma(a, b, c) with one rounding, inline.
MOECHAT_AVX2_INLINE float fma1(float a, float b, float c) {
  return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}

MOECHAT_AVX2_INLINE float f16(const uint8_t* p) { return _cvtsh_ss(loadU16(p)); }

MOECHAT_AVX2_INLINE __m256i load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// (v >> shift) & mask per byte of 32 bytes, shift <= 7 (the 16-bit shift brings in
// bits of the neighbouring byte only above the mask).
MOECHAT_AVX2_INLINE __m256i bitsOf(const uint8_t* p, int shift, int mask) {
  return _mm256_and_si256(_mm256_srl_epi16(load32(p), _mm_cvtsi32_si128(shift)),
                          _mm256_set1_epi8(static_cast<char>(mask)));
}

// The 32 signed weights of a Q8_0 or Q4_0 block (Q4_0: nibble - 8), in element order.
struct WeightsQ8_0 {
  static constexpr int kBytes = kQ8_0Bytes;
  MOECHAT_AVX2_INLINE static __m256i load(const uint8_t* blk) { return load32(blk + 2); }
};

struct WeightsQ4_0 {
  static constexpr int kBytes = kQ4_0Bytes;
  MOECHAT_AVX2_INLINE static __m256i load(const uint8_t* blk) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes);
    return _mm256_sub_epi8(_mm256_and_si256(both, _mm256_set1_epi8(0x0f)), _mm256_set1_epi8(8));
  }
};

// The 8 six-bit scales (bytes 0..7) and mins (bytes 8..15) of a Q4_K/Q5_K block from
// its 12 packed bytes at s, in the field order of quant_layout.h's scaleMinK4. With
// the bytes as words w0 w1 w2: scales 0..3 = w0 & 0x3f.., scales 4..7 = (w2 & 0x0f..)
// | ((w0 >> 2) & 0x30..), mins 0..3 = w1 & 0x3f.., mins 4..7 = ((w2 >> 4) & 0x0f..)
// | ((w1 >> 2) & 0x30..), per byte. Reads 16 bytes, uses 12.
MOECHAT_AVX2_INLINE __m128i scalesAndMinsK4(const uint8_t* s) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
  const __m128i low =
      _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4)),
                    _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i high = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2),
                                     _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(low, high);
}

// The min multipliers of a Q4_K/Q5_K block as words, m_l in words 2l and 2l + 1 (so a
// madd with the activations' sums per 16 gives m_l times sub-block l's sum).
MOECHAT_AVX2_INLINE __m256i minsAsWordPairs(__m128i scales_and_mins) {
  return _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(scales_and_mins, scales_and_mins));
}

// The 32 six-bit quants (0..63) of Q6_K sub-block j.
MOECHAT_AVX2_INLINE __m256i quantsQ6_K(const uint8_t* blk, int j) {
  const Q6Sub s = q6Sub(blk, j);
  return _mm256_or_si256(bitsOf(s.ql, s.ql_shift, 15), _mm256_slli_epi16(bitsOf(s.qh, s.qh_shift, 3), 4));
}

}  // namespace moe::quant::dot::x86
