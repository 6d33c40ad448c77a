// Element formats: IEEE half and bfloat conversion, and the float dot product of
// a block-encoded row (the decoders and the block layouts are in quant_decode.cpp).
//
// dotRow design: every type is decoded 32 elements at a time into exact floats
// (f16, bf16, d*q and d*(n-8) are all exactly representable in f32; a K-quant
// sub-block of 32 is one chunk, and its products d*sc*q, dmin*m are exact too, so
// the one rounding of Q4_K/Q5_K's subtraction is the same whether or not a compiler
// fuses it into an FMA) and fed to the same 32-lane accumulator. The lane structure is identical for every
// type, so dotRow(T, row, x) == dotRow(F32, dequantizeRow(T, row), x) bit for bit on a given code path. The
// CPU backend relies on that: its batched matmul dequantises a weight row once and dots it as F32, and must
// agree with the one-token path.
#include "quant/quant.h"
#include "quant/quant_decode.h"
#include "quant/quant_layout.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define MOECHAT_QUANT_X86 1
#endif

namespace moe::quant {
namespace {

using gguf::TensorType;
using namespace layout;
using decode::decodeChunk;

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// ---------------------------------------------------------------------------
// Portable dot: 32 independent lanes (no reassociation needed, so GCC -O2
// vectorises the lane loop), reduced in a fixed order at the end.

void accumulate32(float* acc, const float* w, const float* x) {  // acc, w, x: [32]
  for (int j = 0; j < kLanes; ++j) acc[j] += w[j] * x[j];
}

float reduce32(const float* acc) {  // acc: [32]; same order as the AVX2 reduction
  float s[8];
  for (int l = 0; l < 8; ++l) s[l] = (acc[l] + acc[8 + l]) + (acc[16 + l] + acc[24 + l]);
  const float s4[4] = {s[0] + s[4], s[1] + s[5], s[2] + s[6], s[3] + s[7]};
  const float s2[2] = {s4[0] + s4[2], s4[1] + s4[3]};
  return s2[0] + s2[1];
}

float dotPortable(TensorType t, const uint8_t* row, const float* x,
                  int64_t n) {  // row: rowBytes(t, n) bytes; x: [n]
  alignas(64) float acc[kLanes] = {};
  alignas(64) float w[kLanes];
  const int64_t full = n - n % kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    decodeChunk(t, row, i, kLanes, w);
    accumulate32(acc, w, x + i);
  }
  if (full < n) {  // plain types only: zero padding adds exact zeros to the lanes
    alignas(64) float xt[kLanes] = {};
    const int rest = static_cast<int>(n - full);
    std::fill(w, w + kLanes, 0.0f);
    decodeChunk(t, row, full, rest, w);
    std::memcpy(xt, x + full, rest * sizeof(float));
    accumulate32(acc, w, xt);
  }
  return reduce32(acc);
}

// ---------------------------------------------------------------------------
// AVX2 + FMA + F16C path: same chunking and lane layout as the portable one
// (4 accumulators of 8 lanes = 32 lanes), chosen at run time.

#ifdef MOECHAT_QUANT_X86
#define MOECHAT_AVX2 __attribute__((target("avx2,fma,f16c")))

// Each decoder yields the 32 elements of one chunk as four registers of 8. Named
// registers rather than arrays: GCC -O2 does not unroll the k-loops, and arrays of
// __m256 indexed in a loop end up on the stack.
struct Chunk {
  __m256 w0, w1, w2, w3;
};

struct DecodeF32 {
  MOECHAT_AVX2 static Chunk block(const uint8_t* p, int64_t i) {
    const float* f = reinterpret_cast<const float*>(p) + i;
    return {_mm256_loadu_ps(f), _mm256_loadu_ps(f + 8), _mm256_loadu_ps(f + 16), _mm256_loadu_ps(f + 24)};
  }
};

struct DecodeF16 {
  MOECHAT_AVX2 static __m256 eight(const uint8_t* h) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
  }
  MOECHAT_AVX2 static Chunk block(const uint8_t* p, int64_t i) {
    const uint8_t* h = p + 2 * i;
    return {eight(h), eight(h + 16), eight(h + 32), eight(h + 48)};
  }
};

struct DecodeBF16 {
  MOECHAT_AVX2 static __m256 eight(const uint8_t* b) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  }
  MOECHAT_AVX2 static Chunk block(const uint8_t* p, int64_t i) {
    const uint8_t* b = p + 2 * i;
    return {eight(b), eight(b + 16), eight(b + 32), eight(b + 48)};
  }
};

struct DecodeQ8_0 {
  MOECHAT_AVX2 static __m256 eight(__m256 d, const uint8_t* q) {  // d * q[0..8)
    const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)));
  }
  MOECHAT_AVX2 static Chunk block(const uint8_t* p, int64_t i) {
    const uint8_t* blk = p + (i / kBlockQ8_0) * kQ8_0Bytes;
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(loadU16(blk)));
    const uint8_t* q = blk + 2;
    return {eight(d, q), eight(d, q + 8), eight(d, q + 16), eight(d, q + 24)};
  }
};

struct DecodeQ4_0 {
  MOECHAT_AVX2 static __m256 eight(__m256 d, __m128i nibbles) {  // d * (n - 8), low 8 bytes
    const __m256i n = _mm256_sub_epi32(_mm256_cvtepu8_epi32(nibbles), _mm256_set1_epi32(8));
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(n));
  }
  MOECHAT_AVX2 static Chunk block(const uint8_t* p, int64_t i) {
    const uint8_t* blk = p + (i / kBlockQ4_0) * kQ4_0Bytes;
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(loadU16(blk)));
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
    const __m128i mask = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_and_si128(bytes, mask);                     // elements 0..15
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);  // elements 16..31
    return {eight(d, lo), eight(d, _mm_srli_si128(lo, 8)), eight(d, hi), eight(d, _mm_srli_si128(hi, 8))};
  }
};

// 32 small unsigned integers (one per byte) as four registers of 8 floats,
// each multiplied by scale and minus offset: (scale * q) - offset, in element order.
MOECHAT_AVX2 inline __m256 eightU8(__m128i bytes, __m256 scale, __m256 offset) {  // low 8 bytes
  const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
  return _mm256_sub_ps(_mm256_mul_ps(scale, q), offset);
}

MOECHAT_AVX2 inline Chunk chunkU8(__m256i q, __m256 scale, __m256 offset) {  // q: 32 bytes
  const __m128i lo = _mm256_castsi256_si128(q);
  const __m128i hi = _mm256_extracti128_si256(q, 1);
  return {eightU8(lo, scale, offset), eightU8(_mm_srli_si128(lo, 8), scale, offset),
          eightU8(hi, scale, offset), eightU8(_mm_srli_si128(hi, 8), scale, offset)};
}

// Nibble (shift 0 or 4) of each of 32 bytes.
MOECHAT_AVX2 inline __m256i nibbles32(const uint8_t* p, int shift) {  // p: [32]
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)), _mm256_set1_epi8(0x0f));
}

// (bits >> shift) & mask of each of 32 bytes, shift <= 7 (the 16-bit shift brings
// in bits of the neighbouring byte only above the mask).
MOECHAT_AVX2 inline __m256i bits32(const uint8_t* p, int shift, int mask) {  // p: [32]
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(shift)),
                          _mm256_set1_epi8(static_cast<char>(mask)));
}

struct DecodeQ4_K {
  MOECHAT_AVX2 static Chunk block(const uint8_t* p, int64_t i) {
    const uint8_t* blk = p + (i / kBlockQK) * kQ4_KBytes;
    const int k = static_cast<int>(i % kBlockQK) / kLanes;
    int sc = 0, m = 0;
    scaleMinK4(blk + 4, k, sc, m);
    const __m256 ds = _mm256_set1_ps(_cvtsh_ss(loadU16(blk)) * static_cast<float>(sc));
    const __m256 dm = _mm256_set1_ps(_cvtsh_ss(loadU16(blk + 2)) * static_cast<float>(m));
    return chunkU8(nibbles32(blk + 16 + 32 * (k / 2), 4 * (k % 2)), ds, dm);
  }
};

struct DecodeQ5_K {
  MOECHAT_AVX2 static Chunk block(const uint8_t* p, int64_t i) {
    const uint8_t* blk = p + (i / kBlockQK) * kQ5_KBytes;
    const int k = static_cast<int>(i % kBlockQK) / kLanes;
    int sc = 0, m = 0;
    scaleMinK4(blk + 4, k, sc, m);
    const __m256 ds = _mm256_set1_ps(_cvtsh_ss(loadU16(blk)) * static_cast<float>(sc));
    const __m256 dm = _mm256_set1_ps(_cvtsh_ss(loadU16(blk + 2)) * static_cast<float>(m));
    const __m256i lo = nibbles32(blk + 48 + 32 * (k / 2), 4 * (k % 2));
    const __m256i hi = _mm256_slli_epi16(bits32(blk + 16, k, 1), 4);  // bit 4 of each byte, no carry
    return chunkU8(_mm256_or_si256(lo, hi), ds, dm);
  }
};

struct DecodeQ6_K {
  MOECHAT_AVX2 static __m256 eight(__m128i bytes, __m256 scale) {  // scale * (q - 32), low 8 bytes
    const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_set1_epi32(32));
    return _mm256_mul_ps(scale, _mm256_cvtepi32_ps(q));
  }
  MOECHAT_AVX2 static Chunk block(const uint8_t* p, int64_t i) {
    const uint8_t* blk = p + (i / kBlockQK) * kQ6_KBytes;
    const Q6Sub s = q6Sub(blk, static_cast<int>(i % kBlockQK) / kLanes);
    const float d = _cvtsh_ss(loadU16(blk + 208));
    const __m256 s0 = _mm256_set1_ps(d * static_cast<float>(s.sc[0]));     // elements 0..15
    const __m256 s1 = _mm256_set1_ps(d * static_cast<float>(s.sc[1]));     // elements 16..31
    const __m256i hi = _mm256_slli_epi16(bits32(s.qh, s.qh_shift, 3), 4);  // bits 4-5, no carry
    const __m256i q = _mm256_or_si256(nibbles32(s.ql, s.ql_shift), hi);
    const __m128i lo128 = _mm256_castsi256_si128(q);
    const __m128i hi128 = _mm256_extracti128_si256(q, 1);
    return {eight(lo128, s0), eight(_mm_srli_si128(lo128, 8), s0), eight(hi128, s1),
            eight(_mm_srli_si128(hi128, 8), s1)};
  }
};

// The types without a decoder of their own here: the portable decoder's exact
// values, loaded as F32 (the same values, so the same bits).
template <TensorType Type>
struct DecodeViaPortable {
  MOECHAT_AVX2 static Chunk block(const uint8_t* p, int64_t i) {
    alignas(32) float w[kLanes];
    decodeChunk(Type, p, i, kLanes, w);
    return DecodeF32::block(reinterpret_cast<const uint8_t*>(w), 0);
  }
};

struct Acc {
  __m256 a0, a1, a2, a3;
};

MOECHAT_AVX2 inline void fma32(Acc& acc, const Chunk& w, const float* x) {  // x: [32]
  acc.a0 = _mm256_fmadd_ps(w.w0, _mm256_loadu_ps(x), acc.a0);
  acc.a1 = _mm256_fmadd_ps(w.w1, _mm256_loadu_ps(x + 8), acc.a1);
  acc.a2 = _mm256_fmadd_ps(w.w2, _mm256_loadu_ps(x + 16), acc.a2);
  acc.a3 = _mm256_fmadd_ps(w.w3, _mm256_loadu_ps(x + 24), acc.a3);
}

MOECHAT_AVX2 inline float reduceAvx2(const Acc& acc) {  // same order as reduce32
  const __m256 s = _mm256_add_ps(_mm256_add_ps(acc.a0, acc.a1), _mm256_add_ps(acc.a2, acc.a3));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
  return _mm_cvtss_f32(s1);
}

template <class Decode>
MOECHAT_AVX2 float dotAvx2(TensorType t, const uint8_t* row, const float* x,
                           int64_t n) {  // row: rowBytes(t, n) bytes; x: [n]
  Acc acc{_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  const int64_t full = n - n % kLanes;
  for (int64_t i = 0; i < full; i += kLanes) fma32(acc, Decode::block(row, i), x + i);
  if (full < n) {  // plain types only; exact values, zero padded as in the portable path
    alignas(32) float wt[kLanes] = {};
    alignas(32) float xt[kLanes] = {};
    const int rest = static_cast<int>(n - full);
    decodeChunk(t, row, full, rest, wt);
    std::memcpy(xt, x + full, rest * sizeof(float));
    fma32(acc, DecodeF32::block(reinterpret_cast<const uint8_t*>(wt), 0), xt);
  }
  return reduceAvx2(acc);
}

// F16C is read from CPUID leaf 1 (ECX bit 29, Intel SDM vol. 2A) because clang 14's
// __builtin_cpu_supports does not know the name "f16c".
bool haveF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
}

bool haveAvx2() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && haveF16c();
  return ok;
}

float dotFast(TensorType t, const uint8_t* row, const float* x, int64_t n) {
  switch (t) {
    case TensorType::F32: return dotAvx2<DecodeF32>(t, row, x, n);
    case TensorType::F16: return dotAvx2<DecodeF16>(t, row, x, n);
    case TensorType::BF16: return dotAvx2<DecodeBF16>(t, row, x, n);
    case TensorType::Q8_0: return dotAvx2<DecodeQ8_0>(t, row, x, n);
    case TensorType::Q4_0: return dotAvx2<DecodeQ4_0>(t, row, x, n);
    case TensorType::Q4_K: return dotAvx2<DecodeQ4_K>(t, row, x, n);
    case TensorType::Q5_K: return dotAvx2<DecodeQ5_K>(t, row, x, n);
    case TensorType::Q6_K: return dotAvx2<DecodeQ6_K>(t, row, x, n);
    case TensorType::Q4_1: return dotAvx2<DecodeViaPortable<TensorType::Q4_1>>(t, row, x, n);
    case TensorType::Q5_0: return dotAvx2<DecodeViaPortable<TensorType::Q5_0>>(t, row, x, n);
    case TensorType::Q5_1: return dotAvx2<DecodeViaPortable<TensorType::Q5_1>>(t, row, x, n);
    case TensorType::IQ4_NL: return dotAvx2<DecodeViaPortable<TensorType::IQ4_NL>>(t, row, x, n);
    case TensorType::MXFP4: return dotAvx2<DecodeViaPortable<TensorType::MXFP4>>(t, row, x, n);
    case TensorType::Q2_K: return dotAvx2<DecodeViaPortable<TensorType::Q2_K>>(t, row, x, n);
    case TensorType::Q3_K: return dotAvx2<DecodeViaPortable<TensorType::Q3_K>>(t, row, x, n);
    case TensorType::IQ4_XS: return dotAvx2<DecodeViaPortable<TensorType::IQ4_XS>>(t, row, x, n);
    case TensorType::IQ1_S: return dotAvx2<DecodeViaPortable<TensorType::IQ1_S>>(t, row, x, n);
    case TensorType::IQ1_M: return dotAvx2<DecodeViaPortable<TensorType::IQ1_M>>(t, row, x, n);
    case TensorType::IQ2_XXS: return dotAvx2<DecodeViaPortable<TensorType::IQ2_XXS>>(t, row, x, n);
    case TensorType::IQ2_XS: return dotAvx2<DecodeViaPortable<TensorType::IQ2_XS>>(t, row, x, n);
    case TensorType::IQ2_S: return dotAvx2<DecodeViaPortable<TensorType::IQ2_S>>(t, row, x, n);
    case TensorType::IQ3_XXS: return dotAvx2<DecodeViaPortable<TensorType::IQ3_XXS>>(t, row, x, n);
    case TensorType::IQ3_S: return dotAvx2<DecodeViaPortable<TensorType::IQ3_S>>(t, row, x, n);
    default: throwUnsupported(t, "dotRow");
  }
}
#endif  // MOECHAT_QUANT_X86

}  // namespace

// ---------------------------------------------------------------------------
// Scalar conversions.

float fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bitsFloat(sign | 0x7f800000u | (mant << 13));  // inf / NaN, payload kept
  if (exp != 0) return bitsFloat(sign | ((exp + (127 - 15)) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24, exact in f32.
  const float v = static_cast<float>(mant) * 0x1p-24f;
  return sign ? -v : v;
}

uint16_t fp32ToFp16(float f) {
  const uint32_t x = floatBits(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u)  // NaN: stays a (quiet) NaN, top payload bits kept
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u)  // >= 65520 (halfway 65504..65536, ties to even = up): inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax < 0x38800000u) {  // below 2^-14: half subnormal (or zero) in units of 2^-24
    const int e = static_cast<int>(ax >> 23);
    const int shift = 126 - e;    // value = mant24 * 2^(e-150) = (mant24 >> shift) * 2^-24
    if (shift > 24) return sign;  // < 2^-25: rounds to zero
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | r);
  }
  const uint32_t r = ax - ((127u - 15u) << 23);  // rebias the exponent
  uint32_t h = r >> 13;
  const uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

float bf16ToFp32(uint16_t b) { return bitsFloat(static_cast<uint32_t>(b) << 16); }

uint16_t fp32ToBf16(float f) {
  const uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)  // NaN: force a mantissa bit so it cannot become inf
    return static_cast<uint16_t>((x >> 16) | 0x0040u);
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);  // ties to even
  return static_cast<uint16_t>(rounded >> 16);
}

// ---------------------------------------------------------------------------
// Row operations.

bool isComputeSupported(gguf::TensorType t) {
  return std::find(std::begin(kComputeTypes), std::end(kComputeTypes), t) != std::end(kComputeTypes);
}

void dequantizeRow(gguf::TensorType t, const uint8_t* src, float* dst, int64_t n) {
  if (!isComputeSupported(t)) throwUnsupported(t, "dequantizeRow");
  checkLength(t, n, "dequantizeRow");
  for (int64_t i = 0; i < n; i += kLanes) {
    const int count = static_cast<int>(std::min<int64_t>(kLanes, n - i));
    decodeChunk(t, src, i, count, dst + i);
  }
}

float dotRowReference(gguf::TensorType t, const uint8_t* row, const float* x, int64_t n) {
  if (!isComputeSupported(t)) throwUnsupported(t, "dotRow");
  checkLength(t, n, "dotRow");
  return dotPortable(t, row, x, n);
}

float dotRow(gguf::TensorType t, const uint8_t* row, const float* x, int64_t n) {
  if (!isComputeSupported(t)) throwUnsupported(t, "dotRow");
  checkLength(t, n, "dotRow");
#ifdef MOECHAT_QUANT_X86
  if (haveAvx2()) return dotFast(t, row, x, n);
#endif
  return dotPortable(t, row, x, n);
}

}  // namespace moe::quant
