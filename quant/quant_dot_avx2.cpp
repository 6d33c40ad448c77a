// AVX2 dot kernels (maddubs/madd integer products, FMA scaling), bit-identical to
// the portable ones: the integer lanes are those of quant_dot.h and the float steps
// the same single roundings. A tile is one weight row by T activations, so a weight
// block is loaded and unpacked once for T activations.
#include "quant/quant_dot_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "quant/quant_dot_x86.h"
#include "quant/quant_grids.h"

namespace moe::quant::dot {
namespace {
MOECHAT_AVX2_INLINE __m256i dotBytes(__m256i acc, __m256i u, __m256i s) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
}  // namespace
}  // namespace moe::quant::dot

#define MOECHAT_GROUP_KERNEL MOECHAT_AVX2
#include "quant/quant_dot_groups_x86.h"

namespace moe::quant::dot {
namespace {

using namespace layout;
using namespace x86;

// ---------------------------------------------------------------------------
// K-quants with Q8_K activations.

// Word j of every 128-bit half of v, in all eight words of that half.
MOECHAT_AVX2_INLINE __m256i broadcastWord(__m256i v, int j) {
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * j)));
}

// The weights of a 256-element block for tileBlocksK: quants(b, j) gives sub-block
// j's 32 quants as bytes (unsigned unless kSigned), scale(b, j) their scales as
// words (one per pair of products); the block total is then taken as quant_dot.h
// says: kBias > 0 subtracts kBias * (scale of each 16 x the activations' sum over
// it) (b.all: the 16 scales as words); kMins adds -(dmin*dx) * (b.mins . sums).
struct KTraits {
  static constexpr int kBias = 0;
  static constexpr bool kMins = false, kSigned = false;
  static constexpr bool kSplitSigns = false;  // magSigns hands out |w| and the signs apart
};

template <bool kFive>
struct WeightsQ45_K : KTraits {
  static constexpr bool kMins = true;
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

// A block with one scale per 16 elements (Q6_K, Q3_K, Q2_K): the 16 scales as words.
struct Scales16 {
  __m256i lo, hi;  // scales 0..7 / 8..15 as words, in both halves
  __m256i all;     // the 16 scales as words
  MOECHAT_AVX2_INLINE static Scales16 of(__m256i s16) {
    return {_mm256_permute2x128_si256(s16, s16, 0x00), _mm256_permute2x128_si256(s16, s16, 0x11), s16};
  }
  // Words 0..7 = scale 2j (elements 0..15), words 8..15 = scale 2j + 1.
  MOECHAT_AVX2_INLINE __m256i forSubBlock(int j) const {
    const __m256i src = j < 4 ? lo : hi;
    const int w = 2 * (j % 4);
    return _mm256_blend_epi32(broadcastWord(src, w), broadcastWord(src, w + 1), 0xf0);
  }
};

// A block of one of them: its 16 scales and d.
struct Block16 {
  const uint8_t* blk;
  Scales16 s;
  __m256i all;  // the 16 scales as words (the bias term's multipliers)
  float d;
};

struct WeightsQ6_K : KTraits {
  static constexpr int kBias = 32;
  static constexpr int kBytes = kQ6_KBytes;
  using Block = Block16;
  MOECHAT_AVX2_INLINE static Block open(const uint8_t* blk) {
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
    return {blk, Scales16::of(s16), s16, f16(blk + 208)};
  }
  MOECHAT_AVX2_INLINE static __m256i quants(const Block& b, int j) { return quantsQ6_K(b.blk, j); }
  MOECHAT_AVX2_INLINE static __m256i scale(const Block& b, int j) { return b.s.forSubBlock(j); }
};

// Q3_K: quants q + 4 = 2 low bits | the hmask bit << 2 (0..7), scales 6-bit - 32.
struct WeightsQ3_K : KTraits {
  static constexpr int kBias = 4;
  static constexpr int kBytes = kQ3_KBytes;
  using Block = Block16;
  MOECHAT_AVX2_INLINE static Block open(const uint8_t* blk) {
    alignas(32) int16_t sc[16];
    for (int k = 0; k < 16; ++k) sc[k] = static_cast<int16_t>(q3KScale(blk + 96, k));
    const __m256i s16 = _mm256_load_si256(reinterpret_cast<const __m256i*>(sc));
    return {blk, Scales16::of(s16), s16, f16(blk + 108)};
  }
  MOECHAT_AVX2_INLINE static __m256i quants(const Block& b, int j) {  // j = 4h + g
    const __m256i low = bitsOf(b.blk + 32 + 32 * (j / 4), 2 * (j % 4), 3);
    return _mm256_or_si256(low, _mm256_slli_epi16(bitsOf(b.blk, j, 1), 2));
  }
  MOECHAT_AVX2_INLINE static __m256i scale(const Block& b, int j) { return b.s.forSubBlock(j); }
};

// Q2_K: quants 0..3, 4-bit scales and mins per 16.
struct WeightsQ2_K : KTraits {
  static constexpr bool kMins = true;
  static constexpr int kBytes = kQ2_KBytes;
  struct Block {
    const uint8_t* blk;
    Scales16 s;
    __m256i mins;
    float d, dmin;
  };
  MOECHAT_AVX2_INLINE static Block open(const uint8_t* blk) {
    const __m256i packed = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
    const __m256i s16 = _mm256_and_si256(packed, _mm256_set1_epi16(15));
    return {blk, Scales16::of(s16), _mm256_srli_epi16(packed, 4), f16(blk + 80), f16(blk + 82)};
  }
  MOECHAT_AVX2_INLINE static __m256i quants(const Block& b, int j) {
    return bitsOf(b.blk + 16 + 32 * (j / 4), 2 * (j % 4), 3);
  }
  MOECHAT_AVX2_INLINE static __m256i scale(const Block& b, int j) { return b.s.forSubBlock(j); }
};

// IQ4_XS: signed table values, one 6-bit scale - 32 per 32.
struct WeightsIQ4_XS : KTraits {
  static constexpr bool kSigned = true;
  static constexpr int kBytes = kIQ4_XSBytes;
  struct Block {
    const uint8_t* blk;
    __m256i scales;  // sub-block j in word j of both halves
    float d;
  };
  MOECHAT_AVX2_INLINE static Block open(const uint8_t* blk) {
    alignas(16) int16_t sc[8];
    for (int k = 0; k < 8; ++k) sc[k] = static_cast<int16_t>(iq4XsScale(blk, k));
    return {blk, _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(sc))), f16(blk)};
  }
  MOECHAT_AVX2_INLINE static __m256i quants(const Block& b, int j) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.blk + 8 + 16 * j));
    const __m256i idx =
        _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), _mm256_set1_epi8(0x0f));
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Values));
    return _mm256_shuffle_epi8(_mm256_set_m128i(t, t), idx);
  }
  MOECHAT_AVX2_INLINE static __m256i scale(const Block& b, int j) { return broadcastWord(b.scales, j); }
};

// The grid-coded IQ types (quant_grids.h): a sub-block's 32 grid magnitudes from four
// table entries and the signs of their sign bits (IQ1: 8 * g + delta, signed), the group
// multipliers m = 2s + 1 as words (four per group of 8), d = the block's d times the
// type's factor. A signed type's magnitudes are multiplied by the activations with
// their signs moved onto the activations (maddubs(|w|, sign(x, s)): one sign per byte,
// the same integers as w * x).
// -1 (0xff) in every byte whose sign bit is set, +1 in the others.
struct SignBytes {
  uint64_t of[256];
  constexpr SignBytes() : of{} {
    for (int s = 0; s < 256; ++s)
      for (int j = 0; j < 8; ++j) of[s] |= uint64_t{((s >> j) & 1) ? 0xffu : 0x01u} << (8 * j);
  }
};
constexpr SignBytes kSignBytes;

template <TensorType Type>
struct WeightsGrid : KTraits {
  static constexpr bool kSigned = true;
  static constexpr bool kIq1 = Type == TensorType::IQ1_S || Type == TensorType::IQ1_M;
  static constexpr int kBytes = Type == TensorType::IQ2_XXS   ? grids::kIQ2_XXSBytes
                                : Type == TensorType::IQ2_XS  ? grids::kIQ2_XSBytes
                                : Type == TensorType::IQ2_S   ? grids::kIQ2_SBytes
                                : Type == TensorType::IQ3_XXS ? grids::kIQ3_XXSBytes
                                : Type == TensorType::IQ3_S   ? grids::kIQ3_SBytes
                                : Type == TensorType::IQ1_S   ? grids::kIQ1_SBytes
                                                              : grids::kIQ1_MBytes;
  struct Block {
    const uint8_t* blk;
    float d;
  };
  MOECHAT_AVX2_INLINE static Block open(const uint8_t* blk) {
    return {blk, grids::gridBlockD(Type, blk) * (kIq1 ? 0.125f : grids::gridFactor(Type))};
  }
  // A sub-block as magnitudes and the +-1 of each byte's sign (the types with sign bits).
  struct MagSigns {
    __m256i mag, sign;
  };
  static constexpr bool kSplitSigns = !kIq1;
  // Four 8-byte magnitude entries and four 8-bit sign patterns.
  MOECHAT_AVX2_INLINE static MagSigns split4(uint64_t g0, uint64_t g1, uint64_t g2, uint64_t g3, uint8_t s0,
                                             uint8_t s1, uint8_t s2, uint8_t s3) {
    return {
        _mm256_setr_epi64x(static_cast<int64_t>(g0), static_cast<int64_t>(g1), static_cast<int64_t>(g2),
                           static_cast<int64_t>(g3)),
        _mm256_setr_epi64x(static_cast<int64_t>(kSignBytes.of[s0]), static_cast<int64_t>(kSignBytes.of[s1]),
                           static_cast<int64_t>(kSignBytes.of[s2]), static_cast<int64_t>(kSignBytes.of[s3]))};
  }
  MOECHAT_AVX2_INLINE static uint32_t u32At(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  MOECHAT_AVX2_INLINE static MagSigns magSigns(const Block& b, int k) {
    using namespace grids;
    static_assert(kSplitSigns, "IQ1 has no sign bits");
    const uint8_t* blk = b.blk;
    if constexpr (Type == TensorType::IQ2_XXS || Type == TensorType::IQ3_XXS) {
      const uint8_t* q = blk + 2 + 8 * k;
      const uint32_t aux = u32At(Type == TensorType::IQ2_XXS ? q + 4 : blk + 66 + 4 * k);
      auto entry = [q](int l) {
        return Type == TensorType::IQ2_XXS
                   ? kIq2xxsGrid[q[l]]
                   : (uint64_t{kIq3xxsGrid[q[2 * l]]} | (uint64_t{kIq3xxsGrid[q[2 * l + 1]]} << 32));
      };
      return split4(entry(0), entry(1), entry(2), entry(3), signBits(aux), signBits(aux >> 7),
                    signBits(aux >> 14), signBits(aux >> 21));
    } else if constexpr (Type == TensorType::IQ2_XS) {
      uint16_t v[4];
      std::memcpy(v, blk + 2 + 8 * k, 8);
      return split4(kIq2xsGrid[v[0] & 511], kIq2xsGrid[v[1] & 511], kIq2xsGrid[v[2] & 511],
                    kIq2xsGrid[v[3] & 511], signBits(v[0] >> 9), signBits(v[1] >> 9), signBits(v[2] >> 9),
                    signBits(v[3] >> 9));
    } else if constexpr (Type == TensorType::IQ2_S) {
      const uint8_t* qs = blk + 2 + 4 * k;
      const uint8_t* sg = blk + 34 + 4 * k;
      const int qh = blk[66 + k];
      return split4(kIq2sGrid[qs[0] | ((qh << 8) & 0x300)], kIq2sGrid[qs[1] | ((qh << 6) & 0x300)],
                    kIq2sGrid[qs[2] | ((qh << 4) & 0x300)], kIq2sGrid[qs[3] | ((qh << 2) & 0x300)], sg[0],
                    sg[1], sg[2], sg[3]);
    } else if constexpr (Type == TensorType::IQ3_S) {
      const uint8_t* q = blk + 2 + 8 * k;
      const uint8_t* sg = blk + 74 + 4 * k;
      const int qh = blk[66 + k];
      auto entry = [q, qh](int l) {
        return uint64_t{kIq3sGrid[q[2 * l] | (((qh >> (2 * l)) & 1) << 8)]} |
               (uint64_t{kIq3sGrid[q[2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8)]} << 32);
      };
      return split4(entry(0), entry(1), entry(2), entry(3), sg[0], sg[1], sg[2], sg[3]);
    }
  }
  // The sub-block's 32 signed values.
  MOECHAT_AVX2_INLINE static __m256i quants(const Block& b, int k) {
    using namespace grids;
    const uint8_t* blk = b.blk;
    if constexpr (kSplitSigns) {
      const MagSigns m = magSigns(b, k);
      return _mm256_sign_epi8(m.mag, m.sign);
    } else {  // IQ1_S, IQ1_M: 8 * g + delta per byte
      uint64_t g[4];
      int8_t delta[4];
      if constexpr (Type == TensorType::IQ1_S) {
        const uint16_t h = loadU16(blk + 34 + 2 * k);
#pragma GCC unroll 4  // g and delta stay in registers (a vector built from stored words stalls)
        for (int l = 0; l < 4; ++l) g[l] = kIq1sGrid[blk[2 + 4 * k + l] | (((h >> (3 * l)) & 7) << 8)];
        delta[0] = delta[1] = delta[2] = delta[3] = (h & 0x8000) ? -1 : 1;
      } else {
#pragma GCC unroll 4
        for (int l = 0; l < 4; ++l) {
          const int nib = (blk[32 + 2 * k + l / 2] >> (4 * (l % 2))) & 15;
          g[l] = kIq1sGrid[blk[4 * k + l] | ((nib & 7) << 8)];
          delta[l] = (nib & 8) ? -1 : 1;
        }
      }
      const __m256i v = _mm256_setr_epi64x(static_cast<int64_t>(g[0]), static_cast<int64_t>(g[1]),
                                           static_cast<int64_t>(g[2]), static_cast<int64_t>(g[3]));
      const __m256i v2 = _mm256_add_epi8(v, v), v4 = _mm256_add_epi8(v2, v2);
      auto bytes = [](int8_t d) {
        return d < 0 ? int64_t{-1} : int64_t{0x0101010101010101};
      };  // -1 or +1 per byte
      const __m256i dv =
          _mm256_setr_epi64x(bytes(delta[0]), bytes(delta[1]), bytes(delta[2]), bytes(delta[3]));
      return _mm256_add_epi8(_mm256_add_epi8(v4, v4), dv);
    }
  }
  // Words 0-7 multiply groups 0-1 (the sub-block's first half), 8-15 groups 2-3.
  MOECHAT_AVX2_INLINE static __m256i scale(const Block& b, int k) {
    const uint8_t* blk = b.blk;
    int lo = 0, hi = 0;
    if constexpr (Type == TensorType::IQ2_XXS) {
      lo = hi = 2 * static_cast<int>(u32At(blk + 6 + 8 * k) >> 28) + 1;
    } else if constexpr (Type == TensorType::IQ3_XXS) {
      lo = hi = 2 * static_cast<int>(u32At(blk + 66 + 4 * k) >> 28) + 1;
    } else if constexpr (Type == TensorType::IQ2_XS || Type == TensorType::IQ2_S) {
      const int sc = blk[(Type == TensorType::IQ2_XS ? 66 : 74) + k];
      lo = 2 * (sc & 15) + 1;
      hi = 2 * (sc >> 4) + 1;
    } else if constexpr (Type == TensorType::IQ3_S) {
      lo = hi = 2 * ((blk[106 + k / 2] >> (4 * (k % 2))) & 15) + 1;
    } else if constexpr (Type == TensorType::IQ1_S) {
      lo = hi = 2 * ((loadU16(blk + 34 + 2 * k) >> 12) & 7) + 1;
    } else {
      const int s = loadU16(blk + 48 + 2 * (k / 2)) >> (6 * (k % 2));
      lo = 2 * (s & 7) + 1;
      hi = 2 * ((s >> 3) & 7) + 1;
    }
    return _mm256_setr_m128i(_mm_set1_epi16(static_cast<int16_t>(lo)),
                             _mm_set1_epi16(static_cast<int16_t>(hi)));
  }
};

// One weight row by T activations: a block's quants and scales are unpacked once.
template <class W, int T>
MOECHAT_AVX2 void tileBlocksK(const TileArgs& a) {
  float acc[T] = {};
  const int64_t nb = a.n / kBlockQK;
  for (int64_t b = 0; b < nb; ++b) {
    const typename W::Block blk = W::open(a.row + b * W::kBytes);
    __m256i p[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) p[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < kSubBlocks; ++j) {
      const __m256i sc = W::scale(blk, j);
      // |w| and the sign of each w: the signed types' |w| * sign(x, w) = w * x.
      __m256i mag, sign;
      if constexpr (W::kSplitSigns) {
        const auto m = W::magSigns(blk, j);
        mag = m.mag, sign = m.sign;
      } else {
        mag = W::quants(blk, j);
        sign = mag;
        if constexpr (W::kSigned) mag = _mm256_sign_epi8(mag, mag);
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {  // |q| <= 127 (63 unsigned): pairs of products fit int16
        const __m256i x = load32(q8kQuants(a.act + t * a.act_stride + b * kQ8_KActBytes) + 32 * j);
        const __m256i prod = _mm256_maddubs_epi16(mag, W::kSigned ? _mm256_sign_epi8(x, sign) : x);
        p[t] = _mm256_add_epi32(p[t], _mm256_madd_epi16(prod, sc));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = a.act + t * a.act_stride + b * kQ8_KActBytes;
      const __m256i sums = load32(q8kSums(xb));
      const float dx = q8kScale(xb);
      if constexpr (W::kBias > 0) {
        constexpr int kShift = std::countr_zero(static_cast<unsigned>(W::kBias));  // kBias: 4 or 32
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(blk.all, sums), kShift);
        acc[t] = fma1(static_cast<float>(sumLanes(_mm256_sub_epi32(p[t], offset))), blk.d * dx, acc[t]);
      } else {
        acc[t] = fma1(static_cast<float>(sumLanes(p[t])), blk.d * dx, acc[t]);
        if constexpr (W::kMins) {
          const int32_t mn = sumLanes(_mm256_madd_epi16(blk.mins, sums));
          acc[t] = fma1(static_cast<float>(mn), -(blk.dmin * dx), acc[t]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) a.y[t * a.y_stride] = acc[t];
}

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

// ---------------------------------------------------------------------------
// Q8_0 interleaved group (quant_repack.h) by one Q8_0 activation. Half h of a
// 64-byte run j holds rows 4h..4h+3, two int32 lanes each: lane 2r' + k is row
// 4h + r''s elements 8j+4k..8j+4k+3, so register (j, h) accumulates lanes 2j and
// 2j + 1 of quant_dot.h's eight for four rows. An activation's eight bytes are
// broadcast to every row and take each weight's sign (|w| * sign(x, w) = w * x).
MOECHAT_AVX2 void groupQ8_0(const GroupArgs& a) {
  constexpr size_t kBlock = 272;
  const int64_t nb = a.n / 32;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[4][2];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* gb = a.group + b * kBlock;
    const uint8_t* xb = a.act + b * kQ8_0ActBytes + 2;
    const __m256 dw = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb))),
                                    _mm256_set1_ps(loadF32(q8_0Scales(a.act, nb) + 4 * b)));
    const __m256 s[2] = {_mm256_permutevar8x32_ps(dw, _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)),
                         _mm256_permutevar8x32_ps(dw, _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7))};
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      int64_t x8;
      std::memcpy(&x8, xb + 8 * j, sizeof x8);
      const __m256i x = _mm256_set1_epi64x(x8);
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m256i w = load32(gb + 16 + 64 * j + 32 * h);
        // Pairs of products fit int16 (<= 2 * 128 * 127).
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
        const __m256i p = _mm256_madd_epi16(p16, ones);
        acc[j][h] = _mm256_fmadd_ps(s[h], _mm256_cvtepi32_ps(p), acc[j][h]);
      }
    }
  }
  // Per row: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), lane 2j + k being
  // register j's lane of parity k.
  __m256 sum[2];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
    sum[h] = _mm256_add_ps(_mm256_add_ps(acc[0][h], acc[2][h]), _mm256_add_ps(acc[1][h], acc[3][h]));
  const __m256 rows = _mm256_hadd_ps(sum[0], sum[1]);  // rows 0 1 4 5 | 2 3 6 7
  _mm256_storeu_ps(a.y, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(rows), 0xd8)));
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
  if (const TileTable* blocks32 = avx2Blocks32Table(t)) return blocks32;
  switch (t) {
    case TensorType::Q4_K: return &TableOf<BlocksK, WeightsQ45_K<false>>::value;
    case TensorType::Q5_K: return &TableOf<BlocksK, WeightsQ45_K<true>>::value;
    case TensorType::Q6_K: return &TableOf<BlocksK, WeightsQ6_K>::value;
    case TensorType::Q3_K: return &TableOf<BlocksK, WeightsQ3_K>::value;
    case TensorType::Q2_K: return &TableOf<BlocksK, WeightsQ2_K>::value;
    case TensorType::IQ4_XS: return &TableOf<BlocksK, WeightsIQ4_XS>::value;
    case TensorType::IQ1_S: return &TableOf<BlocksK, WeightsGrid<TensorType::IQ1_S>>::value;
    case TensorType::IQ1_M: return &TableOf<BlocksK, WeightsGrid<TensorType::IQ1_M>>::value;
    case TensorType::IQ2_XXS: return &TableOf<BlocksK, WeightsGrid<TensorType::IQ2_XXS>>::value;
    case TensorType::IQ2_XS: return &TableOf<BlocksK, WeightsGrid<TensorType::IQ2_XS>>::value;
    case TensorType::IQ2_S: return &TableOf<BlocksK, WeightsGrid<TensorType::IQ2_S>>::value;
    case TensorType::IQ3_XXS: return &TableOf<BlocksK, WeightsGrid<TensorType::IQ3_XXS>>::value;
    case TensorType::IQ3_S: return &TableOf<BlocksK, WeightsGrid<TensorType::IQ3_S>>::value;
    default: return nullptr;
  }
}

// Sixteen 256-bit registers: eight activations at once would spill (Q8_0's eight
// lanes per row take eight accumulators for one activation).
const GroupTable* avx2GroupTable(TensorType t) {
  static constexpr GroupTable q8_0 = {{groupQ8_0, nullptr, nullptr, nullptr}};
  static constexpr GroupTable q4_0 = {{runGroupQ4_0<1>, runGroupQ4_0<2>, runGroupQ4_0<4>, nullptr}};
  static constexpr GroupTable q4_k = {{runGroupQ4_K<1>, runGroupQ4_K<2>, runGroupQ4_K<4>, nullptr}};
  static constexpr GroupTable q5_k = {{runGroupQ5_K<1>, runGroupQ5_K<2>, runGroupQ5_K<4>, nullptr}};
  static constexpr GroupTable q6_k = {{runGroupQ6_K<1>, runGroupQ6_K<2>, nullptr, nullptr}};
  switch (t) {
    case TensorType::Q8_0: return &q8_0;
    case TensorType::Q4_0: return &q4_0;
    case TensorType::Q4_K: return &q4_k;
    case TensorType::Q5_K: return &q5_k;
    case TensorType::Q6_K: return &q6_k;
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
