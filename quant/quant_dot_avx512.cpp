// AVX-512 (F, BW, VL) + VNNI dot kernels, bit-identical to the portable ones.
// Q8_0/Q4_0: one 32-element block per 256-bit register as on AVX2, with VNNI's
// dpbusd forming each lane's four products in one instruction. K-quants: two
// 32-element sub-blocks per 512-bit register; the two halves' int32 lanes are
// added at the end of the 256-element block, which gives exactly the integers of
// quant_dot.h (integer addition is exact in any order).
#include "quant/quant_dot_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

#include <cstring>
#include <type_traits>

#include "quant/quant_dot_x86.h"

#define MOECHAT_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define MOECHAT_AVX512_INLINE \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"), always_inline)) inline

namespace moe::quant::dot {
namespace {
MOECHAT_AVX512_INLINE __m256i dotBytes(__m256i acc, __m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(acc, u, s);
}
}  // namespace
}  // namespace moe::quant::dot

#define MOECHAT_GROUP_KERNEL MOECHAT_AVX512
#include "quant/quant_dot_groups_x86.h"

namespace moe::quant::dot {
namespace {

using namespace layout;
using namespace x86;

// ---------------------------------------------------------------------------
// Q8_0 and Q4_0 weights with Q8_0 activations.

// One weight row by T activations.
template <class W, int T>
MOECHAT_AVX512 void tileBlocks32(const TileArgs& a) {
  __m256 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const int64_t nb = a.n / 32;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = a.row + b * W::kBytes;
    const __m256i w = W::load(blk);
    const __m256i aw = _mm256_abs_epi8(w);  // 128 for -128, read as unsigned by dpbusd
    const __m256 dw = _mm256_set1_ps(f16(blk));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = a.act + t * a.act_stride + b * kQ8_0ActBytes;
      const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, _mm256_sign_epi8(load32(xb + 2), w));
      acc[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(f16(xb))), _mm256_cvtepi32_ps(p), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) a.y[t * a.y_stride] = reduce8(acc[t]);
}

// ---------------------------------------------------------------------------
// K-quants with Q8_K activations, two sub-blocks per register.

// lo in bits 0..255, hi above. (A vector shuffle rather than _mm512_inserti64x4,
// whose GCC 12 header trips -Wmaybe-uninitialized.)
MOECHAT_AVX512_INLINE __m512i join(__m256i lo, __m256i hi) {
  return reinterpret_cast<__m512i>(__builtin_shufflevector(
      reinterpret_cast<__v4di>(lo), reinterpret_cast<__v4di>(hi), 0, 1, 2, 3, 4, 5, 6, 7));
}
MOECHAT_AVX512_INLINE __m256i lowHalf(__m512i v) {
  return reinterpret_cast<__m256i>(
      __builtin_shufflevector(reinterpret_cast<__v8di>(v), reinterpret_cast<__v8di>(v), 0, 1, 2, 3));
}
MOECHAT_AVX512_INLINE __m256i highHalf(__m512i v) {
  return reinterpret_cast<__m256i>(
      __builtin_shufflevector(reinterpret_cast<__v8di>(v), reinterpret_cast<__v8di>(v), 4, 5, 6, 7));
}
MOECHAT_AVX512_INLINE __m512i widen(__m256i v) { return join(v, _mm256_setzero_si256()); }
MOECHAT_AVX512_INLINE __m512i widen(__m128i v) { return widen(_mm256_set_m128i(_mm_setzero_si128(), v)); }

// Words of v picked by index: out word i = v word idx[i] (v: up to 32 words).
MOECHAT_AVX512_INLINE __m512i pickWords(__m512i v, __m512i idx) { return _mm512_permutexvar_epi16(idx, v); }

// Index vector whose words 16*h .. 16*h+15 select word first + h (h = 0, 1), or,
// with quarters, words 8*q .. 8*q+7 select first + q (q = 0..3).
MOECHAT_AVX512_INLINE __m512i halvesIndex(int first) {
  return join(_mm256_set1_epi16(static_cast<int16_t>(first)),
              _mm256_set1_epi16(static_cast<int16_t>(first + 1)));
}
MOECHAT_AVX512_INLINE __m512i quartersIndex(int first) {
  const __m256i lo = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(first + 1)),
                                      _mm_set1_epi16(static_cast<int16_t>(first)));
  const __m256i hi = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(first + 3)),
                                      _mm_set1_epi16(static_cast<int16_t>(first + 2)));
  return join(lo, hi);
}

template <bool kFive>
struct WeightsQ45_K {
  static constexpr int kBytes = kFive ? kQ5_KBytes : kQ4_KBytes;
  struct Block {
    const uint8_t* blk;
    __m512i scales;  // the 8 scales in words 0..7
    __m256i mins;    // m_l in words 2l, 2l+1
    float d, dmin;
  };
  MOECHAT_AVX512_INLINE static Block open(const uint8_t* blk) {
    const __m128i sm = scalesAndMinsK4(blk + 4);
    return {blk, widen(_mm_cvtepu8_epi16(sm)), minsAsWordPairs(sm), f16(blk), f16(blk + 2)};
  }
  // Sub-blocks 2k and 2k+1: the low and high nibbles of the same 32 bytes.
  MOECHAT_AVX512_INLINE static __m512i quants(const Block& b, int k) {
    const __m256i v = load32(b.blk + (kFive ? 48 : 16) + 32 * k);
    const __m256i mask = _mm256_set1_epi8(0x0f);
    __m256i lo = _mm256_and_si256(v, mask), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
    if constexpr (kFive) {
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(bitsOf(b.blk + 16, 2 * k, 1), 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(bitsOf(b.blk + 16, 2 * k + 1, 1), 4));
    }
    return join(lo, hi);
  }
  MOECHAT_AVX512_INLINE static __m512i scale(const Block& b, int k) {
    return pickWords(b.scales, halvesIndex(2 * k));
  }
};

struct WeightsQ6_K {
  static constexpr int kBytes = kQ6_KBytes;
  struct Block {
    const uint8_t* blk;
    __m512i scales;  // the 16 scales in words 0..15
    float d;
  };
  MOECHAT_AVX512_INLINE static Block open(const uint8_t* blk) {
    const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
    return {blk, widen(s16), f16(blk + 208)};
  }
  MOECHAT_AVX512_INLINE static __m512i quants(const Block& b, int k) {
    return join(quantsQ6_K(b.blk, 2 * k), quantsQ6_K(b.blk, 2 * k + 1));
  }
  // Elements are in groups of 16 with scales 4k .. 4k+3, one per quarter.
  MOECHAT_AVX512_INLINE static __m512i scale(const Block& b, int k) {
    return pickWords(b.scales, quartersIndex(4 * k));
  }
};

// One weight row by T activations: a block's quants and scales are unpacked once.
template <class W, int T>
MOECHAT_AVX512 void tileBlocksK(const TileArgs& a) {
  constexpr bool kQ6 = std::is_same_v<W, WeightsQ6_K>;
  float acc[T] = {};
  const int64_t nb = a.n / kBlockQK;
  for (int64_t b = 0; b < nb; ++b) {
    const typename W::Block blk = W::open(a.row + b * W::kBytes);
    __m512i p[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) p[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int k = 0; k < kSubBlocks / 2; ++k) {
      const __m512i q = W::quants(blk, k), sc = W::scale(blk, k);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512i x =
            _mm512_loadu_si512(q8kQuants(a.act + t * a.act_stride + b * kQ8_KActBytes) + 64 * k);
        p[t] = _mm512_add_epi32(p[t], _mm512_madd_epi16(_mm512_maddubs_epi16(q, x), sc));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* xb = a.act + t * a.act_stride + b * kQ8_KActBytes;
      const __m256i sums = load32(q8kSums(xb));
      const float dx = q8kScale(xb);
      const __m256i p8 = _mm256_add_epi32(lowHalf(p[t]), highHalf(p[t]));
      if constexpr (kQ6) {
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(lowHalf(blk.scales), sums), 5);
        acc[t] = fma1(static_cast<float>(sumLanes(_mm256_sub_epi32(p8, offset))), blk.d * dx, acc[t]);
      } else {
        acc[t] = fma1(static_cast<float>(sumLanes(p8)), blk.d * dx, acc[t]);
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

// ---------------------------------------------------------------------------
// Q8_0 interleaved groups (quant_repack.h) by T Q8_0 activations. Run j's 64 bytes
// are one register whose int32 lane 2r + k holds row r's elements 8j+4k..8j+4k+3:
// lane 2j + k of quant_dot.h's eight for that row, so register j accumulates lanes
// 2j and 2j + 1 of all eight rows. An activation's eight bytes are broadcast to
// every row and negated where the weight is negative (VNNI multiplies unsigned
// |w| by signed x: |w| * sign(x, w) = w * x; abs(-128) reads as 128), so one
// dpbusd forms sixteen exact lanes and one fma scales them.
MOECHAT_AVX512_INLINE __m512i broadcast8(const uint8_t* p) {
  int64_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi64(v);
}

// (GCC 12's _mm512_cvtepi32_ps and _mm512_cvtph_ps pass an "undefined" vector that
// trips -Wmaybe-uninitialized; these are the same instructions.)
MOECHAT_AVX512_INLINE __m512 toFloat(__m512i v) {
  return reinterpret_cast<__m512>(__builtin_convertvector(reinterpret_cast<__v16si>(v), __v16sf));
}
MOECHAT_AVX512_INLINE __m512 halvesToFloat(__m256i h) { return _mm512_maskz_cvtph_ps(0xffff, h); }

template <int T>
MOECHAT_AVX512 void groupQ8_0(const GroupArgs& a) {
  constexpr size_t kBlock = 272;
  const int64_t nb = a.n / 32;
  __m512 acc[T][4];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[t][j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* gb = a.group + b * kBlock;
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(gb));  // row r's d in lanes 2r, 2r + 1
    const __m512 dw = halvesToFloat(_mm256_set_m128i(_mm_unpackhi_epi16(h, h), _mm_unpacklo_epi16(h, h)));
    __m512i aw[4];
    __mmask64 neg[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m512i w = _mm512_loadu_si512(gb + 16 + 64 * j);
      neg[j] = _mm512_movepi8_mask(w);
      aw[j] = _mm512_abs_epi8(w);
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const uint8_t* x = a.act + t * a.act_stride;
      const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(loadF32(q8_0Scales(x, nb) + 4 * b)));
      const uint8_t* xq = x + b * kQ8_0ActBytes + 2;
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512i xv = broadcast8(xq + 8 * j);
        const __m512i sx = _mm512_mask_sub_epi8(xv, neg[j], _mm512_setzero_si512(), xv);
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw[j], sx);
        acc[t][j] = _mm512_fmadd_ps(s, toFloat(p), acc[t][j]);
      }
    }
  }
  // Per row: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), lane 2j + k being
  // register j's lane 2r + k.
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const __m512 sum =
        _mm512_add_ps(_mm512_add_ps(acc[t][0], acc[t][2]), _mm512_add_ps(acc[t][1], acc[t][3]));
    const __m256 lo = _mm256_castsi256_ps(lowHalf(_mm512_castps_si512(sum)));  // rows 0..3
    const __m256 hi = _mm256_castsi256_ps(highHalf(_mm512_castps_si512(sum)));
    const __m256 rows = _mm256_hadd_ps(lo, hi);  // rows 0 1 4 5 | 2 3 6 7
    _mm256_storeu_ps(a.y + t * a.y_stride,
                     _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(rows), 0xd8)));
  }
}

template <int T>
void runGroupQ8_0(const GroupArgs& a) {
  groupQ8_0<T>(a);
}

// XCR0 bits 1, 2 (SSE, AVX state) and 5, 6, 7 (opmask, ZMM upper halves, ZMM16-31):
// the OS saves the AVX-512 registers.
bool osSavesAvx512State() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return false;  // OSXSAVE
  uint32_t lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (lo & 0xe6) == 0xe6;
}

}  // namespace

bool cpuHasAvx512() {
  static const bool ok = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!cpuHasAvx2() || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool f = ebx & (1u << 16), bw = ebx & (1u << 30), vl = ebx & (1u << 31), vnni = ecx & (1u << 11);
    return f && bw && vl && vnni && osSavesAvx512State();
  }();
  return ok;
}

const TileTable* avx512Table(TensorType t) {
  switch (t) {
    case TensorType::Q8_0: return &TableOf<Blocks32, WeightsQ8_0>::value;
    case TensorType::Q4_0: return avx2Table(t);  // the block total leaves nothing for VNNI to add
    case TensorType::Q4_K: return &TableOf<BlocksK, WeightsQ45_K<false>>::value;
    case TensorType::Q5_K: return &TableOf<BlocksK, WeightsQ45_K<true>>::value;
    case TensorType::Q6_K: return &TableOf<BlocksK, WeightsQ6_K>::value;
    default: return nullptr;
  }
}

const GroupTable* avx512GroupTable(TensorType t) {
  // Q8_0 keeps four registers per activation: eight would spill.
  static constexpr GroupTable q8_0 = {{runGroupQ8_0<1>, runGroupQ8_0<2>, runGroupQ8_0<4>, nullptr}};
  static constexpr GroupTable q4_0 = {{runGroupQ4_0<1>, runGroupQ4_0<2>, runGroupQ4_0<4>, runGroupQ4_0<8>}};
  static constexpr GroupTable q4_k = {{runGroupQ4_K<1>, runGroupQ4_K<2>, runGroupQ4_K<4>, runGroupQ4_K<8>}};
  static constexpr GroupTable q5_k = {{runGroupQ5_K<1>, runGroupQ5_K<2>, runGroupQ5_K<4>, runGroupQ5_K<8>}};
  static constexpr GroupTable q6_k = {{runGroupQ6_K<1>, runGroupQ6_K<2>, runGroupQ6_K<4>, nullptr}};
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
bool cpuHasAvx512() { return false; }
const TileTable* avx512Table(TensorType) { return nullptr; }
const GroupTable* avx512GroupTable(TensorType) { return nullptr; }
}  // namespace moe::quant::dot

#endif
