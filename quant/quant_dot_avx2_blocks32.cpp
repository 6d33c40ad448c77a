// AVX2 dot kernels of the types in blocks of 32 elements with Q8_0 activations,
// bit-identical to the portable ones (quant_dot.h): Q8_0 (eight lanes per block),
// Q4_0, Q5_0, IQ4_NL and MXFP4 (signed integer weights, one total per block), Q4_1
// and Q5_1 (unsigned weights plus the block minimum times the activation sum).
#include "quant/quant_dot_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include "quant/quant_dot_x86.h"

namespace moe::quant::dot {
namespace {

using namespace layout;
using namespace x86;

// Q8_0: per block 32 signed weights in eight lanes.

// One weight row by T activations.
template <class W, int T>
MOECHAT_AVX2 void tileBlocks32(const TileArgs& a) {
  __m256 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t nb = a.n / 32;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = a.row + b * W::kBytes;
    const __m256i w = W::load(blk);
    const __m256i aw = _mm256_sign_epi8(w, w);  // |w| as unsigned bytes (128 for -128)
    const float dw = f16(blk);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = a.act + t * a.act_stride + b * kQ8_0ActBytes;
      // sign(x, w) * |w| = w * x; pairs of products fit int16 (<= 2 * 128 * 127).
      const __m256i p16 = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(load32(xb + 2), w));
      const __m256i p = _mm256_madd_epi16(p16, ones);  // lane l: elements 4l..4l+3
      acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * f16(xb)), _mm256_cvtepi32_ps(p), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) a.y[t * a.y_stride] = reduce8(acc[t]);
}

// The exact block totals of p0..p3 (each the eight lanes of one block), in order.
MOECHAT_AVX2_INLINE __m128i blockTotals4(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
  const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// acc + p[0] * s[0] + ... + p[3] * s[3]: four fmas in lane order, each rounded once.
MOECHAT_AVX2_INLINE float fmaLanes4(__m128 p, __m128 s, float acc) {
  __m128 a = _mm_set_ss(acc);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    a = _mm_fmadd_ss(p, s, a);
    p = _mm_castsi128_ps(_mm_srli_si128(_mm_castps_si128(p), 4));
    s = _mm_castsi128_ps(_mm_srli_si128(_mm_castps_si128(s), 4));
  }
  return _mm_cvtss_f32(a);
}

// Nibble j (low) and j + 16 (high) of 16 bytes as 32 bytes 0..15 in element order.
MOECHAT_AVX2_INLINE __m256i nibbles16(const uint8_t* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), _mm256_set1_epi8(0x0f));
}

// Bit j of a little-endian 32-bit field as 0x10 in byte j (the fifth bit of Q5_0/Q5_1).
MOECHAT_AVX2_INLINE __m256i fifthBits(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i mask = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, mask), mask), _mm256_set1_epi8(0x10));
}

MOECHAT_AVX2_INLINE __m128 f16x4(const uint8_t* blk, int stride) {
  return _mm_cvtph_ps(_mm_setr_epi16(static_cast<int16_t>(loadU16(blk)),
                                     static_cast<int16_t>(loadU16(blk + stride)),
                                     static_cast<int16_t>(loadU16(blk + 2 * stride)),
                                     static_cast<int16_t>(loadU16(blk + 3 * stride)), 0, 0, 0, 0));
}

// Signed weights with an f16 scale first in the block.
template <int kBlockBytes>
struct F16Scaled {
  static constexpr int kBytes = kBlockBytes;
  MOECHAT_AVX2_INLINE static float scale(const uint8_t* blk) { return f16(blk); }
  MOECHAT_AVX2_INLINE static __m128 scales4(const uint8_t* blk) { return f16x4(blk, kBlockBytes); }
};

struct SignedQ4_0 : F16Scaled<kQ4_0Bytes> {
  MOECHAT_AVX2_INLINE static __m256i load(const uint8_t* blk) { return WeightsQ4_0::load(blk); }
};

struct SignedQ5_0 : F16Scaled<kQ5_0Bytes> {
  MOECHAT_AVX2_INLINE static __m256i load(const uint8_t* blk) {
    return _mm256_sub_epi8(_mm256_or_si256(nibbles16(blk + 6), fifthBits(blk + 2)), _mm256_set1_epi8(16));
  }
};

MOECHAT_AVX2_INLINE __m256i lookup16(const int8_t* table, __m256i idx) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(table));
  return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), idx);
}

struct SignedIQ4_NL : F16Scaled<kIQ4_NLBytes> {
  MOECHAT_AVX2_INLINE static __m256i load(const uint8_t* blk) {
    return lookup16(kIq4Values, nibbles16(blk + 2));
  }
};

struct SignedMXFP4 {
  static constexpr int kBytes = kMXFP4Bytes;
  MOECHAT_AVX2_INLINE static __m256i load(const uint8_t* blk) {
    return lookup16(kMxfp4Values, nibbles16(blk + 1));
  }
  MOECHAT_AVX2_INLINE static float scale(const uint8_t* blk) { return e8m0Half(blk[0]); }
  MOECHAT_AVX2_INLINE static __m128 scales4(const uint8_t* blk) {
    return _mm_setr_ps(scale(blk), scale(blk + kBytes), scale(blk + 2 * kBytes), scale(blk + 3 * kBytes));
  }
};

// One row of signed-weight blocks by T Q8_0 activations: per block the exact total
// of the eight lanes, then one fma (quant_dot.h). Four blocks share one horizontal
// sum (three hadds) and one vector product of scales; their fmas stay in block order.
template <class W, int T>
MOECHAT_AVX2 void tileTotals32(const TileArgs& a) {
  float acc[T] = {};
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t nb = a.n / 32;
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const uint8_t* blk = a.row + b * W::kBytes;
    __m256i w[4], aw[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      w[k] = W::load(blk + k * W::kBytes);
      aw[k] = _mm256_sign_epi8(w[k], w[k]);
    }
    const __m128 dw = W::scales4(blk);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* x = a.act + t * a.act_stride;
      __m256i p[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i xk = load32(x + (b + k) * kQ8_0ActBytes + 2);
        p[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(aw[k], _mm256_sign_epi8(xk, w[k])), ones);
      }
      const __m128 pf = _mm_cvtepi32_ps(blockTotals4(p[0], p[1], p[2], p[3]));
      const __m128 sc =
          _mm_mul_ps(dw, _mm_loadu_ps(reinterpret_cast<const float*>(q8_0Scales(x, nb) + 4 * b)));
      acc[t] = fmaLanes4(pf, sc, acc[t]);
    }
  }
  for (; b < nb; ++b) {
    const uint8_t* blk = a.row + b * W::kBytes;
    const __m256i w = W::load(blk);
    const __m256i aw = _mm256_sign_epi8(w, w);
    const float dw = W::scale(blk);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* x = a.act + t * a.act_stride;
      const __m256i p16 = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(load32(x + b * kQ8_0ActBytes + 2), w));
      const int32_t p = sumLanes(_mm256_madd_epi16(p16, ones));
      acc[t] = fma1(static_cast<float>(p), dw * loadF32(q8_0Scales(x, nb) + 4 * b), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) a.y[t * a.y_stride] = acc[t];
}

// Q4_1 / Q5_1: unsigned weights, f16 d and m.
template <bool kFive>
struct AffineQ45_1 {
  static constexpr int kBytes = kFive ? kQ5_1Bytes : kQ4_1Bytes;
  MOECHAT_AVX2_INLINE static __m256i load(const uint8_t* blk) {
    if constexpr (kFive) return _mm256_or_si256(nibbles16(blk + 8), fifthBits(blk + 4));
    return nibbles16(blk + 4);
  }
};

// One row of Q4_1/Q5_1 by T activations: per block fma(P, d*dx), then fma(S, m*dx).
template <class W, int T>
MOECHAT_AVX2 void tileAffine32(const TileArgs& a) {
  float acc[T] = {};
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t nb = a.n / 32;
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const uint8_t* blk = a.row + b * W::kBytes;
    __m256i w[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) w[k] = W::load(blk + k * W::kBytes);
    const __m128 dw = f16x4(blk, W::kBytes), mw = f16x4(blk + 2, W::kBytes);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* x = a.act + t * a.act_stride;
      __m256i p[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k)  // q <= 31: pairs of products fit int16
        p[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(w[k], load32(x + (b + k) * kQ8_0ActBytes + 2)), ones);
      const __m128 pf = _mm_cvtepi32_ps(blockTotals4(p[0], p[1], p[2], p[3]));
      const __m128 dx = _mm_loadu_ps(reinterpret_cast<const float*>(q8_0Scales(x, nb) + 4 * b));
      const __m128 sf =
          _mm_cvtepi32_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q8_0Sums(x, nb) + 4 * b)));
      alignas(16) float pv[4], sv[4], ds[4], ms[4];
      _mm_store_ps(pv, pf);
      _mm_store_ps(sv, sf);
      _mm_store_ps(ds, _mm_mul_ps(dw, dx));
      _mm_store_ps(ms, _mm_mul_ps(mw, dx));
      float r = acc[t];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) r = fma1(sv[k], ms[k], fma1(pv[k], ds[k], r));
      acc[t] = r;
    }
  }
  for (; b < nb; ++b) {
    const uint8_t* blk = a.row + b * W::kBytes;
    const __m256i w = W::load(blk);
    const float dw = f16(blk), mw = f16(blk + 2);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* x = a.act + t * a.act_stride;
      const int32_t p =
          sumLanes(_mm256_madd_epi16(_mm256_maddubs_epi16(w, load32(x + b * kQ8_0ActBytes + 2)), ones));
      const float dx = loadF32(q8_0Scales(x, nb) + 4 * b);
      const auto s = static_cast<float>(loadI32(q8_0Sums(x, nb) + 4 * b));
      acc[t] = fma1(s, mw * dx, fma1(static_cast<float>(p), dw * dx, acc[t]));
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) a.y[t * a.y_stride] = acc[t];
}

template <class W, int T>
struct Blocks32 {
  static void run(const TileArgs& a) { tileBlocks32<W, T>(a); }
};
template <class W, int T>
struct Totals32 {
  static void run(const TileArgs& a) { tileTotals32<W, T>(a); }
};
template <class W, int T>
struct Affine32 {
  static void run(const TileArgs& a) { tileAffine32<W, T>(a); }
};

}  // namespace

const TileTable* avx2Blocks32Table(TensorType t) {
  switch (t) {
    case TensorType::Q8_0: return &TableOf<Blocks32, WeightsQ8_0>::value;
    case TensorType::Q4_0: return &TableOf<Totals32, SignedQ4_0>::value;
    case TensorType::Q5_0: return &TableOf<Totals32, SignedQ5_0>::value;
    case TensorType::IQ4_NL: return &TableOf<Totals32, SignedIQ4_NL>::value;
    case TensorType::MXFP4: return &TableOf<Totals32, SignedMXFP4>::value;
    case TensorType::Q4_1: return &TableOf<Affine32, AffineQ45_1<false>>::value;
    case TensorType::Q5_1: return &TableOf<Affine32, AffineQ45_1<true>>::value;
    default: return nullptr;
  }
}

}  // namespace moe::quant::dot

#else  // not x86

namespace moe::quant::dot {
const TileTable* avx2Blocks32Table(TensorType) { return nullptr; }
}  // namespace moe::quant::dot

#endif
