// AVX2 dot kernels (maddubs/madd integer products, FMA scaling), bit-identical to
// the portable ones: the integer lanes are those of quant_dot.h and the float steps
// the same single roundings. A tile is one weight row by T activations, so a weight
// block is loaded and unpacked once for T activations.
#include "models/quant_dot_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

#include <cmath>
#include <type_traits>

#include "models/quant_dot_x86.h"

namespace moe::quant::dot {
namespace {
MOECHAT_AVX2_INLINE __m256i dotBytes(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
}  // namespace
}  // namespace moe::quant::dot

#define MOECHAT_GROUP_KERNEL MOECHAT_AVX2
#include "models/quant_dot_groups_x86.h"

namespace moe::quant::dot {
namespace {

using namespace layout;
using namespace x86;

// ---------------------------------------------------------------------------
// Q8_0 and Q4_0 weights with Q8_0 activations: per block 32 signed weights.

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

// One Q4_0 row by T Q8_0 activations: per block the exact total of the eight
// lanes, then one fma (quant_dot.h). Four blocks share one horizontal sum (three
// hadds) and one vector product of scales; their fmas stay in block order.
template <int T>
MOECHAT_AVX2 void tileQ4_0(const TileArgs& a) {
  float acc[T] = {};
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t nb = a.n / 32;
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const uint8_t* blk = a.row + b * kQ4_0Bytes;
    __m256i w[4], aw[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      w[k] = WeightsQ4_0::load(blk + k * kQ4_0Bytes);
      aw[k] = _mm256_sign_epi8(w[k], w[k]);
    }
    const __m128 dw = _mm_cvtph_ps(
        _mm_setr_epi16(static_cast<int16_t>(loadU16(blk)), static_cast<int16_t>(loadU16(blk + kQ4_0Bytes)),
                       static_cast<int16_t>(loadU16(blk + 2 * kQ4_0Bytes)),
                       static_cast<int16_t>(loadU16(blk + 3 * kQ4_0Bytes)), 0, 0, 0, 0));
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
    const uint8_t* blk = a.row + b * kQ4_0Bytes;
    const __m256i w = WeightsQ4_0::load(blk);
    const __m256i aw = _mm256_sign_epi8(w, w);
    const float dw = f16(blk);
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

template <int T>
struct RowsQ4_0 {
  static void run(const TileArgs& a) { tileQ4_0<T>(a); }
};

// ---------------------------------------------------------------------------
// K-quants with Q8_K activations.

// Word j of every 128-bit half of v, in all eight words of that half.
MOECHAT_AVX2_INLINE __m256i broadcastWord(__m256i v, int j) {
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * j)));
}

template <bool kFive>
struct WeightsQ45_K {
  static constexpr int kBytes = kFive ? kQ5_KBytes : kQ4_KBytes;
  // Per row and block: the scales as words (sub-block j in word j of both halves)
  // and the min terms' multipliers (m_l in words 2l, 2l+1).
  struct Block {
    const uint8_t* blk;
    __m256i scales, mins;
    float d, dmin;
  };
  MOECHAT_AVX2_INLINE static Block open(const uint8_t* blk) {
    const __m128i sm = scalesAndMinsK4(blk + 4);
    return {blk, _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm)), minsAsWordPairs(sm), f16(blk),
            f16(blk + 2)};
  }
  MOECHAT_AVX2_INLINE static __m256i quants(const Block& b, int j) {  // sub-block j, 0..31
    const uint8_t* qs = b.blk + (kFive ? 48 : 16) + 32 * (j / 2);
    __m256i q = bitsOf(qs, 4 * (j % 2), 15);
    if constexpr (kFive) q = _mm256_or_si256(q, _mm256_slli_epi16(bitsOf(b.blk + 16, j, 1), 4));
    return q;
  }
  MOECHAT_AVX2_INLINE static __m256i scale(const Block& b, int j) { return broadcastWord(b.scales, j); }
};

struct WeightsQ6_K {
  static constexpr int kBytes = kQ6_KBytes;
  struct Block {
    const uint8_t* blk;
    __m256i lo, hi;  // scales 0..7 / 8..15 as words, in both halves
    __m256i all;     // the 16 scales as words
    float d;
  };
  MOECHAT_AVX2_INLINE static Block open(const uint8_t* blk) {
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
    return {blk, _mm256_permute2x128_si256(s16, s16, 0x00), _mm256_permute2x128_si256(s16, s16, 0x11), s16,
            f16(blk + 208)};
  }
  MOECHAT_AVX2_INLINE static __m256i quants(const Block& b, int j) { return quantsQ6_K(b.blk, j); }
  // Words 0..7 = scale 2j (elements 0..15), words 8..15 = scale 2j + 1.
  MOECHAT_AVX2_INLINE static __m256i scale(const Block& b, int j) {
    const __m256i src = j < 4 ? b.lo : b.hi;
    const int w = 2 * (j % 4);
    return _mm256_blend_epi32(broadcastWord(src, w), broadcastWord(src, w + 1), 0xf0);
  }
};

// One weight row by T activations: a block's quants and scales are unpacked once.
template <class W, int T>
MOECHAT_AVX2 void tileBlocksK(const TileArgs& a) {
  constexpr bool kQ6 = std::is_same_v<W, WeightsQ6_K>;
  float acc[T] = {};
  const int64_t nb = a.n / kBlockQK;
  for (int64_t b = 0; b < nb; ++b) {
    const typename W::Block blk = W::open(a.row + b * W::kBytes);
    __m256i p[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) p[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < kSubBlocks; ++j) {
      const __m256i q = W::quants(blk, j), sc = W::scale(blk, j);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {  // q <= 63: pairs of products fit int16
        const __m256i x = load32(q8kQuants(a.act + t * a.act_stride + b * kQ8_KActBytes) + 32 * j);
        p[t] = _mm256_add_epi32(p[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), sc));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = a.act + t * a.act_stride + b * kQ8_KActBytes;
      const __m256i sums = load32(q8kSums(xb));
      const float dx = q8kScale(xb);
      if constexpr (kQ6) {
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(blk.all, sums), 5);
        acc[t] = fma1(static_cast<float>(sumLanes(_mm256_sub_epi32(p[t], offset))), blk.d * dx, acc[t]);
      } else {
        acc[t] = fma1(static_cast<float>(sumLanes(p[t])), blk.d * dx, acc[t]);
        const int32_t mn = sumLanes(_mm256_madd_epi16(blk.mins, sums));
        acc[t] = fma1(static_cast<float>(mn), -(blk.dmin * dx), acc[t]);
      }
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
struct BlocksK {
  static void run(const TileArgs& a) { tileBlocksK<W, T>(a); }
};

// 32 int32 in four registers -> 32 int8 in element order (the values fit).
MOECHAT_AVX2_INLINE __m256i packBytes(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
  // packs works per 128-bit half: the dwords come out as a0 b0 c0 d0 a1 b1 c1 d1.
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

MOECHAT_AVX2_INLINE float maxLane(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
}

// |x| lanes, max kept where |x| is NaN (as std::max(amax, |x|) keeps amax).
MOECHAT_AVX2_INLINE __m256 absMaxInto(__m256 acc, __m256 x) {
  return _mm256_max_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), acc);
}

}  // namespace

MOECHAT_AVX2 void quantizeQ8_0Avx2(const float* x, int64_t nb, uint8_t* dst) {
  uint8_t* scales = dst + nb * kQ8_0ActBytes;
  uint8_t* sums = dst + nb * (kQ8_0ActBytes + 4);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + 32 * b;
    __m256 v[4], amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) amax = absMaxInto(amax, v[i] = _mm256_loadu_ps(xb + 8 * i));
    const float d = maxLane(amax) / 127.0f;
    const __m256 id = _mm256_set1_ps(d != 0.0f ? 1.0f / d : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));  // to nearest even
    uint8_t* blk = dst + b * kQ8_0ActBytes;
    const uint16_t h = fp32ToFp16(d);
    storeU16(blk, h);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk + 2), packBytes(q[0], q[1], q[2], q[3]));
    const float d16 = fp16ToFp32(h);
    const int32_t sum =
        sumLanes(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
    std::memcpy(scales + 4 * b, &d16, 4);
    std::memcpy(sums + 4 * b, &sum, 4);
  }
}

MOECHAT_AVX2 void quantizeQ8_KAvx2(const float* x, int64_t nb, uint8_t* dst) {
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + kBlockQK * b;
    uint8_t* blk = dst + b * kQ8_KActBytes;
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < kBlockQK; i += 8) amax = absMaxInto(amax, _mm256_loadu_ps(xb + i));
    const float m = maxLane(amax);
    float d = 0.0f;
    if (m == 0.0f) {
      std::memset(blk + 4, 0, kBlockQK + 32);
    } else {
      int first = 0;  // the first element of largest magnitude gives the sign
      while (std::fabs(xb[first]) != m) ++first;
      const float iscale = -127.0f / xb[first];
      const __m256 vs = _mm256_set1_ps(iscale);
      const __m256i top = _mm256_set1_epi32(127);
      for (int g = 0; g < kBlockQK; g += 32) {
        __m256i q[4];
        for (int i = 0; i < 4; ++i)
          q[i] =
              _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(xb + g + 8 * i))), top);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(blk + 4 + g), packBytes(q[0], q[1], q[2], q[3]));
        for (int h = 0; h < 2; ++h) {
          const auto s = static_cast<int16_t>(sumLanes(_mm256_add_epi32(q[2 * h], q[2 * h + 1])));
          std::memcpy(blk + 260 + 2 * (g / 16 + h), &s, 2);
        }
      }
      d = 1.0f / iscale;
    }
    std::memcpy(blk, &d, 4);
  }
}

bool cpuHasAvx2() {
  static const bool ok = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
    return f16c && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return ok;
}

const TileTable* avx2Table(TensorType t) {
  static constexpr TileTable rowsQ4_0 = {
      {RowsQ4_0<1>::run, RowsQ4_0<2>::run, RowsQ4_0<4>::run, RowsQ4_0<8>::run}};
  switch (t) {
    case TensorType::Q8_0: return &TableOf<Blocks32, WeightsQ8_0>::value;
    case TensorType::Q4_0: return &rowsQ4_0;
    case TensorType::Q4_K: return &TableOf<BlocksK, WeightsQ45_K<false>>::value;
    case TensorType::Q5_K: return &TableOf<BlocksK, WeightsQ45_K<true>>::value;
    case TensorType::Q6_K: return &TableOf<BlocksK, WeightsQ6_K>::value;
    default: return nullptr;
  }
}

// Sixteen 256-bit registers: eight activations at once would spill.
const GroupTable* avx2GroupTable(TensorType t) {
  static constexpr GroupTable q4_0 = {{runGroupQ4_0<1>, runGroupQ4_0<2>, runGroupQ4_0<4>, nullptr}};
  static constexpr GroupTable q4_k = {{runGroupQ4_K<1>, runGroupQ4_K<2>, runGroupQ4_K<4>, nullptr}};
  switch (t) {
    case TensorType::Q4_0: return &q4_0;
    case TensorType::Q4_K: return &q4_k;
    default: return nullptr;
  }
}

}  // namespace moe::quant::dot

#else  // not x86

namespace moe::quant::dot {
bool cpuHasAvx2() { return false; }
const TileTable* avx2Table(TensorType) { return nullptr; }
void quantizeQ8_0Avx2(const float*, int64_t, uint8_t*) {}
void quantizeQ8_KAvx2(const float*, int64_t, uint8_t*) {}
const GroupTable* avx2GroupTable(TensorType) { return nullptr; }
}  // namespace moe::quant::dot

#endif
