// Element formats (quant/quant.h): hand-written blocks with hand-computed values,
// f16/bf16 edge cases, reference-quantiser error bounds, dotRow against the
// dequantised dot, row sizes and unsupported types. The K-quant blocks (Q4_K, Q5_K,
// Q6_K) are assembled field by field from the layout in shared/GGUF-NOTES.md and
// every one of their 256 elements is checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "models/gguf.h"
#include "quant/quant.h"
#include "support/test_log.h"

using moe::gguf::TensorType;
namespace quant = moe::quant;

namespace {

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::vector<float> randomFloats(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<uint8_t> encode(TensorType t, const std::vector<float>& x) {
  std::vector<uint8_t> bytes(moe::gguf::rowBytes(t, x.size()));
  quant::quantizeRow(t, x.data(), bytes.data(), static_cast<int64_t>(x.size()));
  return bytes;
}

std::vector<float> decode(TensorType t, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(n);
  quant::dequantizeRow(t, bytes.data(), out.data(), n);
  return out;
}

uint16_t f16Of(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

void putF16(uint8_t* p, uint16_t h) {
  p[0] = static_cast<uint8_t>(h & 0xff);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// The 8 (scale, min) pairs of a Q4_K/Q5_K block, written here from the documented
// packing: pair j < 4 in the low 6 bits of bytes j (scale) and j+4 (min); pair j >= 4
// has its low 4 bits in byte j+4 (scale: low nibble, min: high nibble) and its top
// 2 bits in the top bits of bytes j-4 (scale) and j (min).
struct ScaleMin {
  int sc[8];
  int m[8];
};

ScaleMin unpackScales(const uint8_t* s) {  // s: [12]
  ScaleMin r{};
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      r.sc[j] = s[j] & 63;
      r.m[j] = s[j + 4] & 63;
    } else {
      r.sc[j] = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
      r.m[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
  }
  return r;
}

// Element e of a Q4_K / Q5_K block: chunk c = e / 64; its first 32 elements are the
// low nibbles of qs[32c..32c+31] (pair 2c), the next 32 the high nibbles (pair 2c+1);
// Q5_K adds bit (2c or 2c+1) of qh[e % 32] as +16.
int qOfQ45(const uint8_t* qs, const uint8_t* qh, int e) {
  const int c = e / 64, l = e % 32;
  const bool high = (e % 64) >= 32;
  int q = high ? (qs[32 * c + l] >> 4) : (qs[32 * c + l] & 15);
  if (qh && ((qh[l] >> (2 * c + (high ? 1 : 0))) & 1)) q += 16;
  return q;
}

float pairValue(float d, float dmin, int sc, int m, int q) {
  return (d * static_cast<float>(sc)) * static_cast<float>(q) - dmin * static_cast<float>(m);
}

// Element e of a Q6_K block: half h = e / 128 (ql + 64h, qh + 32h, scales + 8h); in
// it, l = e % 32 and group g = (e % 128) / 32: low 4 bits from ql[l] (g 0), ql[l+32]
// (g 1), ql[l] >> 4 (g 2), ql[l+32] >> 4 (g 3); high 2 bits = bits 2g, 2g+1 of qh[l];
// minus 32; scale = scales[e / 16].
int qOfQ6(const uint8_t* ql, const uint8_t* qh, int e) {
  const int h = e / 128, g = (e % 128) / 32, l = e % 32;
  const uint8_t lo_byte = ql[64 * h + l + (g % 2 == 1 ? 32 : 0)];
  const int lo = g < 2 ? (lo_byte & 15) : (lo_byte >> 4);
  const int hi = (qh[32 * h + l] >> (2 * g)) & 3;
  return (lo | (hi << 4)) - 32;
}

// Normalised mean squared error of y against x.
double nmseOf(const std::vector<float>& x, const std::vector<float>& y) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    den += static_cast<double>(x[i]) * x[i];
  }
  return num / den;
}

}  // namespace

// ---- hand-written blocks -------------------------------------------------

TEST(Quant, f32Row) {
  // 1.5f = 0x3FC00000, -0.25f = 0xBE800000, little-endian.
  const uint8_t row[] = {0x00, 0x00, 0xC0, 0x3F, 0x00, 0x00, 0x80, 0xBE};
  float out[2];
  quant::dequantizeRow(TensorType::F32, row, out, 2);
  ASSERT_FLOAT_EQ(out[0], 1.5f);
  ASSERT_FLOAT_EQ(out[1], -0.25f);
}

TEST(Quant, f16Row) {
  // 0x3C00 = 1.0, 0xC000 = -2.0, 0x0001 = 2^-24 (smallest subnormal),
  // 0x7BFF = 65504 (largest finite), 0x3555 = 0.333251953125 (1 + 341/1024) * 2^-2.
  const uint8_t row[] = {0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0xFF, 0x7B, 0x55, 0x35};
  float out[5];
  quant::dequantizeRow(TensorType::F16, row, out, 5);
  ASSERT_FLOAT_EQ(out[0], 1.0f);
  ASSERT_FLOAT_EQ(out[1], -2.0f);
  ASSERT_FLOAT_EQ(out[2], 0x1p-24f);
  ASSERT_FLOAT_EQ(out[3], 65504.0f);
  ASSERT_FLOAT_EQ(out[4], 0.333251953125f);
}

TEST(Quant, bf16Row) {
  // 0x3F80 = 1.0, 0x40C0 = 6.0, 0xBF40 = -0.75 (the upper halves of the f32 bits).
  const uint8_t row[] = {0x80, 0x3F, 0xC0, 0x40, 0x40, 0xBF};
  float out[3];
  quant::dequantizeRow(TensorType::BF16, row, out, 3);
  ASSERT_FLOAT_EQ(out[0], 1.0f);
  ASSERT_FLOAT_EQ(out[1], 6.0f);
  ASSERT_FLOAT_EQ(out[2], -0.75f);
}

TEST(Quant, q8_0Block) {
  // ggml block_q8_0: f16 d = 0x3800 (0.5), then int8 q[32].
  uint8_t blk[34] = {0x00, 0x38};
  const int8_t q[6] = {1, -2, 127, -128, 0, 3};
  std::memcpy(blk + 2, q, sizeof q);  // q[6..31] = 0
  // Expected d*q: 0.5, -1, 63.5, -64, 0, 1.5, then zeros.
  const float expected[6] = {0.5f, -1.0f, 63.5f, -64.0f, 0.0f, 1.5f};
  float out[32];
  quant::dequantizeRow(TensorType::Q8_0, blk, out, 32);
  for (int j = 0; j < 6; ++j) ASSERT_FLOAT_EQ(out[j], expected[j]);
  for (int j = 6; j < 32; ++j) ASSERT_FLOAT_EQ(out[j], 0.0f);
}

TEST(Quant, q4_0Block) {
  // ggml block_q4_0: f16 d = 0x3800 (0.5), qs[16]; byte j: low nibble = element j,
  // high nibble = element j + 16; value = d * (nibble - 8).
  uint8_t blk[18] = {0x00, 0x38};
  std::memset(blk + 2, 0x88, 16);  // nibble 8 everywhere = 0.0
  blk[2 + 0] = 0x9F;               // element 0: 0.5*(15-8) =  3.5; element 16: 0.5*(9-8) =  0.5
  blk[2 + 1] = 0x08;               // element 1: 0.5*(8-8)  =  0.0; element 17: 0.5*(0-8) = -4.0
  blk[2 + 15] = 0x3A;              // element 15: 0.5*(10-8) = 1.0; element 31: 0.5*(3-8) = -2.5
  float out[32];
  quant::dequantizeRow(TensorType::Q4_0, blk, out, 32);
  ASSERT_FLOAT_EQ(out[0], 3.5f);
  ASSERT_FLOAT_EQ(out[16], 0.5f);
  ASSERT_FLOAT_EQ(out[1], 0.0f);
  ASSERT_FLOAT_EQ(out[17], -4.0f);
  ASSERT_FLOAT_EQ(out[15], 1.0f);
  ASSERT_FLOAT_EQ(out[31], -2.5f);
  for (int j : {2, 3, 10, 14, 18, 25, 30}) ASSERT_FLOAT_EQ(out[j], 0.0f);
}

TEST(Quant, q4_KScalePacking) {
  // Twelve literal bytes and the pairs they hold, worked out by hand:
  // byte 0 = 0x41 = 01|000001: scale0 = 1, top bits of scale4 = 1
  // byte 8 = 0x01: scale4 low nibble 1, min4 low nibble 0 -> scale4 = 1 + 16 = 17,
  //   min4 = 0 + (byte 4 = 0x40 = 01|000000 -> top bits 1) * 16 = 16
  const uint8_t s[12] = {0x41, 0x82, 0xC3, 0xFF, 0x40, 0x85, 0x4A, 0x3F, 0x01, 0x81, 0xF0, 0x1F};
  const ScaleMin p = unpackScales(s);
  const int sc[8] = {1, 2, 3, 63, 17, 33, 48, 63};
  const int m[8] = {0, 5, 10, 63, 16, 40, 31, 1};
  for (int j = 0; j < 8; ++j) {
    ASSERT_EQ(p.sc[j], sc[j]);
    ASSERT_EQ(p.m[j], m[j]);
  }
}

TEST(Quant, q4_KBlock) {
  // block_q4_K: f16 d, f16 dmin, scales[12], qs[128] = 144 bytes.
  uint8_t blk[144] = {};
  putF16(blk, 0x3400);      // d = 0.25
  putF16(blk + 2, 0x3000);  // dmin = 0.125
  const uint8_t s[12] = {0x41, 0x82, 0xC3, 0xFF, 0x40, 0x85, 0x4A, 0x3F, 0x01, 0x81, 0xF0, 0x1F};
  std::memcpy(blk + 4, s, 12);
  for (int i = 0; i < 128; ++i) blk[16 + i] = static_cast<uint8_t>(i * 37 + 11);
  float out[256];
  quant::dequantizeRow(TensorType::Q4_K, blk, out, 256);
  // By hand: element 0 = low nibble of qs[0] = 0x0B = 11, pair 0 (1, 0):
  // 0.25*1*11 - 0 = 2.75. Element 32 = high nibble of qs[0] = 0, pair 1 (2, 5):
  // -0.125*5 = -0.625. Element 255 = high nibble of qs[127] (127*37+11 = 4710 =
  // 0x1266 -> 0x66 -> 6), pair 7 (63, 1): 0.25*63*6 - 0.125 = 94.375.
  ASSERT_FLOAT_EQ(out[0], 2.75f);
  ASSERT_FLOAT_EQ(out[32], -0.625f);
  ASSERT_FLOAT_EQ(out[255], 94.375f);
  const ScaleMin p = unpackScales(s);
  for (int e = 0; e < 256; ++e) {
    const int pair = e / 32;
    ASSERT_FLOAT_EQ(out[e], pairValue(0.25f, 0.125f, p.sc[pair], p.m[pair], qOfQ45(blk + 16, nullptr, e)));
  }
}

TEST(Quant, q5_KBlock) {
  // block_q5_K: f16 d, f16 dmin, scales[12], qh[32], qs[128] = 176 bytes.
  uint8_t blk[176] = {};
  putF16(blk, 0x3800);      // d = 0.5
  putF16(blk + 2, 0x3C00);  // dmin = 1.0
  const uint8_t s[12] = {0x41, 0x82, 0xC3, 0xFF, 0x40, 0x85, 0x4A, 0x3F, 0x01, 0x81, 0xF0, 0x1F};
  std::memcpy(blk + 4, s, 12);
  for (int l = 0; l < 32; ++l) blk[16 + l] = static_cast<uint8_t>(l * 53 + 5);   // qh
  for (int i = 0; i < 128; ++i) blk[48 + i] = static_cast<uint8_t>(i * 29 + 7);  // qs
  float out[256];
  quant::dequantizeRow(TensorType::Q5_K, blk, out, 256);
  // By hand: element 0: qs[0] = 7 (low nibble 7), qh[0] = 5 = 0b101 (bit 0 set):
  // q = 23, pair 0 (1, 0): 0.5*23 = 11.5. Element 32: high nibble of qs[0] = 0, bit 1
  // of qh[0] clear: q = 0, pair 1 (2, 5): -5. Element 64 + 1 = 65: low nibble of
  // qs[33] (33*29+7 = 964 = 0x3C4 -> 0xC4 -> 4), qh[1] = 58 = 0b111010, bit 2 clear:
  // q = 4, pair 2 (3, 10): 0.5*3*4 - 10 = -4. Element 96 + 1 = 97: high nibble
  // of qs[33] = 12, bit 3 of qh[1] set: q = 28, pair 3 (63, 63): 0.5*63*28 - 63 = 819.
  ASSERT_FLOAT_EQ(out[0], 11.5f);
  ASSERT_FLOAT_EQ(out[32], -5.0f);
  ASSERT_FLOAT_EQ(out[65], -4.0f);
  ASSERT_FLOAT_EQ(out[97], 819.0f);
  const ScaleMin p = unpackScales(s);
  for (int e = 0; e < 256; ++e) {
    const int pair = e / 32;
    ASSERT_FLOAT_EQ(out[e], pairValue(0.5f, 1.0f, p.sc[pair], p.m[pair], qOfQ45(blk + 48, blk + 16, e)));
  }
}

TEST(Quant, q6_KBlock) {
  // block_q6_K: ql[128], qh[64], int8 scales[16], f16 d (last) = 210 bytes.
  uint8_t blk[210] = {};
  for (int i = 0; i < 128; ++i) blk[i] = static_cast<uint8_t>(i * 41 + 3);         // ql
  for (int i = 0; i < 64; ++i) blk[128 + i] = static_cast<uint8_t>(i * 23 + 200);  // qh
  const int8_t sc[16] = {1, -1, 2, -2, 3, 127, -128, 0, 5, -7, 11, 13, -17, 19, 64, -64};
  std::memcpy(blk + 192, sc, 16);
  putF16(blk + 208, 0x3800);  // d = 0.5
  float out[256];
  quant::dequantizeRow(TensorType::Q6_K, blk, out, 256);
  // By hand: element 0: ql[0] = 3 (low nibble 3), qh[0] = 200 = 0b11001000 (bits
  // 0-1 = 0): q = 3 - 32 = -29, scale 1: 0.5*1*-29 = -14.5. Element 32 (group 1):
  // low nibble of ql[32] (32*41+3 = 1315 = 0x523 -> 0x23 -> 3), bits 2-3 of qh[0] = 2:
  // q = 3 + 32 - 32 = 3, scale sc[2] = 2: 3. Element 64 (group 2): high nibble of
  // ql[0] = 0, bits 4-5 of qh[0] = 0: q = -32, scale sc[4] = 3: -48. Element 96
  // (group 3): high nibble of ql[32] = 2, bits 6-7 of qh[0] = 3: q = 50 - 32 = 18,
  // scale sc[6] = -128: 0.5*-128*18 = -1152. Element 128 (second half): ql[64]
  // (64*41+3 = 2627 = 0xA43 -> 0x43, low nibble 3), qh[32] (32*23+200 = 936 =
  // 0x3A8 -> 0xA8, bits 0-1 = 0): q = -29, scale sc[8] = 5: -72.5.
  ASSERT_FLOAT_EQ(out[0], -14.5f);
  ASSERT_FLOAT_EQ(out[32], 3.0f);
  ASSERT_FLOAT_EQ(out[64], -48.0f);
  ASSERT_FLOAT_EQ(out[96], -1152.0f);
  ASSERT_FLOAT_EQ(out[128], -72.5f);
  for (int e = 0; e < 256; ++e)
    ASSERT_FLOAT_EQ(out[e],
                    (0.5f * static_cast<float>(sc[e / 16])) * static_cast<float>(qOfQ6(blk, blk + 128, e)));
}

TEST(Quant, kQuantRowOfSeveralBlocks) {
  // Block b of a row starts at b * block bytes: a second block with other fields
  // must decode on its own (catches a wrong block stride).
  for (auto [t, bytes] :
       {std::pair{TensorType::Q4_K, 144}, {TensorType::Q5_K, 176}, {TensorType::Q6_K, 210}}) {
    const auto x = randomFloats(512, 31, 1.0f);
    const auto row = encode(t, x);
    ASSERT_EQ(row.size(), size_t(2 * bytes));
    const auto whole = decode(t, row, 512);
    const auto second = decode(t, std::vector<uint8_t>(row.begin() + bytes, row.end()), 256);
    for (int i = 0; i < 256; ++i) ASSERT_FLOAT_EQ(whole[256 + i], second[i]);
  }
}

TEST(Quant, q8_0ReferenceQuantiser) {
  // x[j] = j - 16: amax = 16, d = 16/127, q = roundf(x * 127/16).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  const auto blk = encode(TensorType::Q8_0, x);
  ASSERT_EQ(blk.size(), size_t{34});
  ASSERT_EQ(f16Of(blk.data()), quant::fp32ToFp16(16.0f / 127.0f));
  const auto* q = reinterpret_cast<const int8_t*>(blk.data() + 2);
  ASSERT_EQ(int(q[0]), -127);  // -16 * 7.9375
  ASSERT_EQ(int(q[16]), 0);
  ASSERT_EQ(int(q[17]), 8);    // 7.9375 rounds to 8
  ASSERT_EQ(int(q[18]), 16);   // 15.875
  ASSERT_EQ(int(q[31]), 119);  // 15 * 7.9375 = 119.0625
}

TEST(Quant, q4_0ReferenceQuantiser) {
  // x[j] = j - 16: the largest magnitude is x[0] = -16, so max = -16, d = -16/-8 = 2,
  // id = 0.5, q = min(15, (int8)(x*0.5 + 8.5)).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  const auto blk = encode(TensorType::Q4_0, x);
  ASSERT_EQ(blk.size(), size_t{18});
  ASSERT_EQ(f16Of(blk.data()), uint16_t{0x4000});  // 2.0
  // byte 0: q0 = (int)(0.5) = 0, q16 = (int)(8.5) = 8          -> 0x80
  // byte 1: q1 = (int)(1.0) = 1, q17 = (int)(9.0) = 9          -> 0x91
  // byte 15: q15 = (int)(8.0) = 8, q31 = min(15, 16) = 15      -> 0xF8
  ASSERT_EQ(int(blk[2 + 0]), 0x80);
  ASSERT_EQ(int(blk[2 + 1]), 0x91);
  ASSERT_EQ(int(blk[2 + 15]), 0xF8);
}

// ---- f16 / bf16 scalars --------------------------------------------------

TEST(Quant, fp16Encode) {
  ASSERT_EQ(quant::fp32ToFp16(0.0f), uint16_t{0x0000});
  ASSERT_EQ(quant::fp32ToFp16(-0.0f), uint16_t{0x8000});
  ASSERT_EQ(quant::fp32ToFp16(1.0f), uint16_t{0x3C00});
  ASSERT_EQ(quant::fp32ToFp16(65504.0f), uint16_t{0x7BFF});
  ASSERT_EQ(quant::fp32ToFp16(65519.0f), uint16_t{0x7BFF});  // below the 65520 midpoint
  ASSERT_EQ(quant::fp32ToFp16(65520.0f), uint16_t{0x7C00});  // tie, 0x7BFF is odd: up to inf
  ASSERT_EQ(quant::fp32ToFp16(1e9f), uint16_t{0x7C00});
  ASSERT_EQ(quant::fp32ToFp16(-1e9f), uint16_t{0xFC00});
  ASSERT_EQ(quant::fp32ToFp16(std::numeric_limits<float>::infinity()), uint16_t{0x7C00});
  ASSERT_EQ(quant::fp32ToFp16(-std::numeric_limits<float>::infinity()), uint16_t{0xFC00});
  const uint16_t nan = quant::fp32ToFp16(std::numeric_limits<float>::quiet_NaN());
  ASSERT_EQ(nan & 0x7C00, 0x7C00);
  ASSERT_TRUE((nan & 0x03FF) != 0);
  // A signalling NaN whose payload sits only in the low bits must stay NaN.
  ASSERT_TRUE((quant::fp32ToFp16(bitsToFloat(0x7F800001u)) & 0x03FF) != 0);
}

TEST(Quant, fp16Subnormals) {
  ASSERT_EQ(quant::fp32ToFp16(0x1p-24f), uint16_t{0x0001});    // smallest subnormal
  ASSERT_EQ(quant::fp32ToFp16(0x1p-25f), uint16_t{0x0000});    // tie 0 / 2^-24: even = 0
  ASSERT_EQ(quant::fp32ToFp16(0x1.8p-25f), uint16_t{0x0001});  // 0.75 ulp: up
  ASSERT_EQ(quant::fp32ToFp16(0x1.8p-24f), uint16_t{0x0002});  // tie 1 / 2 ulps: even = 2
  ASSERT_EQ(quant::fp32ToFp16(0x1.4p-23f), uint16_t{0x0002});  // 2.5 ulps: tie, even = 2
  ASSERT_EQ(quant::fp32ToFp16(-0x1p-24f), uint16_t{0x8001});
  ASSERT_EQ(quant::fp32ToFp16(1e-10f), uint16_t{0x0000});
  // Midway between the largest subnormal (1023 * 2^-24) and 2^-14: 1023 is odd, so up.
  ASSERT_EQ(quant::fp32ToFp16(1023.5f * 0x1p-24f), uint16_t{0x0400});
  ASSERT_FLOAT_EQ(quant::fp16ToFp32(0x03FF), 1023.0f * 0x1p-24f);
  ASSERT_FLOAT_EQ(quant::fp16ToFp32(0x0400), 0x1p-14f);
}

TEST(Quant, fp16NormalTies) {
  // 1 + 2^-11 is midway between 1.0 (mantissa 0, even) and 1 + 2^-10: down.
  ASSERT_EQ(quant::fp32ToFp16(1.0f + 0x1p-11f), uint16_t{0x3C00});
  // 1 + 3*2^-11 is midway between mantissa 1 (odd) and 2: up to 2.
  ASSERT_EQ(quant::fp32ToFp16(1.0f + 3 * 0x1p-11f), uint16_t{0x3C02});
  // Just above the midpoint rounds up.
  ASSERT_EQ(quant::fp32ToFp16(1.0f + 0x1p-11f + 0x1p-20f), uint16_t{0x3C01});
  // Mantissa carry into the exponent: 2 - 2^-12 -> 2.0.
  ASSERT_EQ(quant::fp32ToFp16(2.0f - 0x1p-12f), uint16_t{0x4000});
}

TEST(Quant, fp16Decode) {
  ASSERT_FLOAT_EQ(quant::fp16ToFp32(0x0000), 0.0f);
  ASSERT_TRUE(std::signbit(quant::fp16ToFp32(0x8000)));
  ASSERT_FLOAT_EQ(quant::fp16ToFp32(0x7C00), std::numeric_limits<float>::infinity());
  ASSERT_FLOAT_EQ(quant::fp16ToFp32(0xFC00), -std::numeric_limits<float>::infinity());
  ASSERT_TRUE(std::isnan(quant::fp16ToFp32(0x7E00)));
  ASSERT_TRUE(std::isnan(quant::fp16ToFp32(0x7C01)));
  ASSERT_FLOAT_EQ(quant::fp16ToFp32(0xC000), -2.0f);
}

TEST(Quant, fp16RoundTripAllCodes) {
  // Every f16 value is exact in f32, so decode -> encode must give the code back.
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = quant::fp16ToFp32(static_cast<uint16_t>(h));
    const uint16_t back = quant::fp32ToFp16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE((back & 0x7C00) == 0x7C00 && (back & 0x03FF) != 0) << moe::test::format("%x", h);
    } else if (back != h) {
      FAIL() << moe::test::format("code 0x%4x came back as 0x%4x", h, unsigned(back));
    }
  }
}

TEST(Quant, bf16Conversions) {
  ASSERT_EQ(quant::fp32ToBf16(1.0f), uint16_t{0x3F80});
  ASSERT_FLOAT_EQ(quant::bf16ToFp32(0x3F80), 1.0f);
  // 0x3F808000 is midway between 0x3F80 (even) and 0x3F81: down.
  ASSERT_EQ(quant::fp32ToBf16(bitsToFloat(0x3F808000u)), uint16_t{0x3F80});
  // 0x3F818000 is midway between 0x3F81 (odd) and 0x3F82: up.
  ASSERT_EQ(quant::fp32ToBf16(bitsToFloat(0x3F818000u)), uint16_t{0x3F82});
  ASSERT_EQ(quant::fp32ToBf16(bitsToFloat(0x3F808001u)), uint16_t{0x3F81});
  ASSERT_EQ(quant::fp32ToBf16(-0.0f), uint16_t{0x8000});
  ASSERT_EQ(quant::fp32ToBf16(std::numeric_limits<float>::infinity()), uint16_t{0x7F80});
  ASSERT_EQ(quant::fp32ToBf16(std::numeric_limits<float>::max()), uint16_t{0x7F80});  // RNE overflow
  // A NaN whose payload is only in the low 16 bits must not truncate to inf.
  ASSERT_TRUE(std::isnan(quant::bf16ToFp32(quant::fp32ToBf16(bitsToFloat(0x7F800001u)))));
  ASSERT_TRUE(std::isnan(quant::bf16ToFp32(quant::fp32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

// ---- quantise -> dequantise ---------------------------------------------

TEST(Quant, q8_0ErrorBound) {
  // ggml quantises with the unrounded d = amax/127 and stores d16 = f16(d), so per
  // element |x - d16*q| <= |d|/2 (rounding to the grid) + |q| * |d - d16| (the f16
  // rounding of d: relative 2^-11, but absolute 2^-25 once d is an f16 subnormal,
  // which the 1e-3 scale reaches) + a few float ulps of x for 1/d and x*id.
  for (float scale : {1e-3f, 1.0f, 300.0f}) {
    const auto x = randomFloats(32 * 64, 7, scale);
    const auto blk = encode(TensorType::Q8_0, x);
    const auto y = decode(TensorType::Q8_0, blk, static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const uint8_t* b = blk.data() + (i / 32) * 34;
      float amax = 0.0f;
      for (size_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float d = amax / 127.0f;
      const float d16 = quant::fp16ToFp32(f16Of(b));
      const int q = std::abs(static_cast<int8_t>(b[2 + i % 32]));
      const float bound = 0.5f * d + q * std::fabs(d - d16) + 1e-6f * std::fabs(x[i]);
      ASSERT_TRUE(std::fabs(x[i] - y[i]) <= bound) << i;
    }
  }
}

TEST(Quant, q4_0ErrorBound) {
  // Same bound as Q8_0 with d = |max|/8 and |q - 8| <= 8, except elements that hit
  // the clamp at 15 (x/d > 7.5 on the side opposite the largest magnitude): those
  // may be off by up to |d| instead of |d|/2.
  for (float scale : {1e-3f, 1.0f, 300.0f}) {
    const auto x = randomFloats(32 * 64, 11, scale);
    const auto blk = encode(TensorType::Q4_0, x);
    const auto y = decode(TensorType::Q4_0, blk, static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const uint8_t* b = blk.data() + (i / 32) * 18;
      float amax = 0.0f;
      for (size_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float d = amax / 8.0f;
      const float d16 = std::fabs(quant::fp16ToFp32(f16Of(b)));
      const int j = static_cast<int>(i % 32);
      const int nib = j < 16 ? (b[2 + j] & 0x0f) : (b[2 + j - 16] >> 4);
      const bool clamped = nib == 15 && std::fabs(x[i]) > 7.5f * d;
      const float grid = clamped ? d : 0.5f * d;
      const float bound = grid + 8 * std::fabs(d - d16) + 1e-6f * std::fabs(x[i]);
      ASSERT_TRUE(std::fabs(x[i] - y[i]) <= bound) << i;
    }
  }
}

TEST(Quant, q4_KAndQ5_KErrorBound) {
  // y = (d*sc)*q - dmin*m with q in [0, nmax]. Per sub-block the quantiser takes
  // step = (max - min(min, 0)) / nmax; the 6-bit codes sc = round(step/d), m =
  // round(-min/dmin) are off by at most d/2 and dmin/2 (d, dmin: the stored f16
  // values), so the grid's ends move by at most nmax*d/2 + dmin/2 and an element
  // lands within half a grid step (d*sc/2) of it or at a moved end. Bound per
  // element: d*sc/2 + nmax*d/2 + dmin/2, plus float rounding.
  for (auto [t, nmax, bytes] : {std::tuple{TensorType::Q4_K, 15, 144}, {TensorType::Q5_K, 31, 176}}) {
    for (float scale : {1e-3f, 1.0f, 300.0f}) {
      const auto x = randomFloats(256 * 16, 13, scale);
      const auto blk = encode(t, x);
      const auto y = decode(t, blk, static_cast<int64_t>(x.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        const uint8_t* b = blk.data() + (i / 256) * bytes;
        const float d = quant::fp16ToFp32(f16Of(b));
        const float dmin = quant::fp16ToFp32(f16Of(b + 2));
        const int sc = unpackScales(b + 4).sc[(i % 256) / 32];
        // The unrounded d, dmin (largest step / 63, largest -min / 63): a code that
        // hits 63 because f16 rounded d down misses by up to 63 * |d - d16|.
        float smax = 0.0f, mmax = 0.0f;
        for (size_t k = i / 256 * 256; k < i / 256 * 256 + 256; k += 32) {
          float lo = 0.0f, hi = x[k];
          for (size_t l = k; l < k + 32; ++l) lo = std::min(lo, x[l]), hi = std::max(hi, x[l]);
          smax = std::max(smax, (hi - lo) / nmax);
          mmax = std::max(mmax, -lo);
        }
        const float f16err = 63.0f * (nmax * std::fabs(smax / 63.0f - d) + std::fabs(mmax / 63.0f - dmin));
        const float bound = 0.5f * d * sc + 0.5f * nmax * d + 0.5f * dmin + f16err + 1e-6f * std::fabs(x[i]);
        ASSERT_TRUE(std::fabs(x[i] - y[i]) <= bound)
            << moe::test::format("%g %zu: %g vs %g", scale, i, x[i], y[i]);
      }
      // Normal data: nmse about step^2/12 / sigma^2 (step ~ range of 32 normals / nmax);
      // measured 0.0063 (Q4_K) and 0.0015 (Q5_K) at every scale with this quantiser.
      const double e = nmseOf(x, y);
      moe::test::info("%s scale %g: nmse %.5f", moe::gguf::tensorTypeName(t), scale, e);
      ASSERT_TRUE(e < (nmax == 15 ? 9e-3 : 2.5e-3)) << moe::test::format("%g", e);
    }
  }
}

TEST(Quant, q6_KErrorBound) {
  // y = (d*sc)*(q - 32), q - 32 in [-32, 31]. Per sub-block of 16 the quantiser
  // takes step = amax/31 and sc = round(step/d), off by at most d/2; an element
  // lands within d*sc/2 of the grid or at its clamped end, moved by <= 31*d/2.
  for (float scale : {1e-3f, 1.0f, 300.0f}) {
    const auto x = randomFloats(256 * 16, 17, scale);
    const auto blk = encode(TensorType::Q6_K, x);
    const auto y = decode(TensorType::Q6_K, blk, static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const uint8_t* b = blk.data() + (i / 256) * 210;
      const float d = quant::fp16ToFp32(f16Of(b + 208));
      const int sc = static_cast<int8_t>(b[192 + (i % 256) / 16]);
      float amax = 0.0f;  // the unrounded d = largest step / 127 (see the Q4_K bound)
      for (size_t k = i / 256 * 256; k < i / 256 * 256 + 256; ++k) amax = std::max(amax, std::fabs(x[k]));
      const float f16err = 31.0f * 127.0f * std::fabs(amax / 31.0f / 127.0f - d);
      const float bound = 0.5f * d * sc + 15.5f * d + f16err + 1e-6f * std::fabs(x[i]);
      ASSERT_TRUE(std::fabs(x[i] - y[i]) <= bound)
          << moe::test::format("%g %zu: %g vs %g", scale, i, x[i], y[i]);
    }
    const double e = nmseOf(x, y);  // measured 0.00037 at every scale
    moe::test::info("Q6_K scale %g: nmse %.6f", scale, e);
    ASSERT_TRUE(e < 5e-4) << moe::test::format("%g", e);
  }
}

TEST(Quant, zeroBlocks) {
  // d = 0 must give id = 0 (no division by zero) and exact zeros back.
  const std::vector<float> x(256, 0.0f);
  for (TensorType t :
       {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    const auto y = decode(t, encode(t, x), 256);
    for (float v : y) ASSERT_FLOAT_EQ(v, 0.0f);
  }
}

TEST(Quant, plainTypesRoundTrip) {
  const auto x = randomFloats(37, 3, 2.0f);
  ASSERT_EQ(decode(TensorType::F32, encode(TensorType::F32, x), 37), x);
  const auto h = decode(TensorType::F16, encode(TensorType::F16, x), 37);
  const auto b = decode(TensorType::BF16, encode(TensorType::BF16, x), 37);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(std::fabs(h[i] - x[i]) <= std::fabs(x[i]) * 0x1p-11f);  // half an f16 ulp
    ASSERT_TRUE(std::fabs(b[i] - x[i]) <= std::fabs(x[i]) * 0x1p-8f);   // half a bf16 ulp
  }
}

// ---- dotRow --------------------------------------------------------------

namespace {

struct DotRowCase {
  std::string name;
  TensorType type;
  int n;
};

std::vector<DotRowCase> dotRowCases() {
  std::vector<DotRowCase> rows;
  for (int n : {32, 64, 96, 4096}) {
    rows.push_back({moe::test::format("q8_0/%d", n), TensorType::Q8_0, n});
    rows.push_back({moe::test::format("q4_0/%d", n), TensorType::Q4_0, n});
  }
  for (int n : {256, 512, 4096}) {
    rows.push_back({moe::test::format("q4_k/%d", n), TensorType::Q4_K, n});
    rows.push_back({moe::test::format("q5_k/%d", n), TensorType::Q5_K, n});
    rows.push_back({moe::test::format("q6_k/%d", n), TensorType::Q6_K, n});
  }
  for (int n : {1, 7, 32, 33, 100, 4096}) {
    rows.push_back({moe::test::format("f32/%d", n), TensorType::F32, n});
    rows.push_back({moe::test::format("f16/%d", n), TensorType::F16, n});
    rows.push_back({moe::test::format("bf16/%d", n), TensorType::BF16, n});
  }
  return rows;
}

void checkDotRow(TensorType t, int n) {
  const auto w = randomFloats(n, 100 + n, 1.0f);
  const auto x = randomFloats(n, 200 + n, 1.0f);
  const auto row = encode(t, w);
  const auto deq = decode(t, row, n);
  // Reference: the dequantised row dotted in double. Bound 1e-5 relative to
  // sum |w||x| (float accumulation of n <= 4096 terms errs by ~n * 2^-24 at worst;
  // measuring against sum |w||x| keeps cancellation from inflating the ratio).
  double exact = 0.0, magnitude = 0.0;
  for (int i = 0; i < n; ++i) {
    exact += static_cast<double>(deq[i]) * x[i];
    magnitude += std::fabs(static_cast<double>(deq[i]) * x[i]);
  }
  const float fast = quant::dotRow(t, row.data(), x.data(), n);
  const float portable = quant::dotRowReference(t, row.data(), x.data(), n);
  ASSERT_TRUE(std::fabs(fast - exact) <= 1e-5 * magnitude) << moe::test::format("%g", fast - exact);
  ASSERT_TRUE(std::fabs(portable - exact) <= 1e-5 * magnitude) << moe::test::format("%g", portable - exact);
  // The documented identity the batched matmul relies on: same summation order
  // for every type, so the encoded row and its F32 dequantisation give equal bits.
  const auto* deq_bytes = reinterpret_cast<const uint8_t*>(deq.data());
  ASSERT_EQ(fast, quant::dotRow(TensorType::F32, deq_bytes, x.data(), n));
  ASSERT_EQ(portable, quant::dotRowReference(TensorType::F32, deq_bytes, x.data(), n));
}

}  // namespace

TEST(Quant, dotRow) {
  for (const DotRowCase& c : dotRowCases()) {
    SCOPED_TRACE(c.name);
    checkDotRow(c.type, c.n);
  }
}

// ---- sizes and errors ----------------------------------------------------

TEST(Quant, rowBytesOfEachType) {
  ASSERT_EQ(moe::gguf::rowBytes(TensorType::F32, 64), uint64_t{256});
  ASSERT_EQ(moe::gguf::rowBytes(TensorType::F16, 64), uint64_t{128});
  ASSERT_EQ(moe::gguf::rowBytes(TensorType::BF16, 64), uint64_t{128});
  ASSERT_EQ(moe::gguf::rowBytes(TensorType::Q8_0, 64), uint64_t{68});    // 2 blocks x 34
  ASSERT_EQ(moe::gguf::rowBytes(TensorType::Q4_0, 64), uint64_t{36});    // 2 blocks x 18
  ASSERT_EQ(moe::gguf::rowBytes(TensorType::Q4_K, 512), uint64_t{288});  // 2 blocks x 144
  ASSERT_EQ(moe::gguf::rowBytes(TensorType::Q5_K, 256), uint64_t{176});
  ASSERT_EQ(moe::gguf::rowBytes(TensorType::Q6_K, 768), uint64_t{630});  // 3 blocks x 210
  ASSERT_EQ(moe::gguf::rowBytes(TensorType::F16, 7), uint64_t{14});
  ASSERT_THROW(moe::gguf::rowBytes(TensorType::Q8_0, 33), moe::gguf::GgufError);
}

TEST(Quant, computeSupport) {
  for (TensorType t :
       {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0, TensorType::Q4_0,
        TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::IQ2_XXS, TensorType::IQ1_M})
    ASSERT_TRUE(quant::isComputeSupported(t));
  for (TensorType t : {TensorType::I8, TensorType::I16, TensorType::I32})
    ASSERT_TRUE(!quant::isComputeSupported(t));
}

TEST(Quant, unsupportedTypeThrowsNamingIt) {
  std::vector<uint8_t> row(4 * 512, 0);
  std::vector<float> x(512, 1.0f);
  for (TensorType t : {TensorType::I16, TensorType::I32}) {
    try {
      quant::dotRow(t, row.data(), x.data(), 512);
      FAIL() << "dotRow of an uncomputed type did not throw";
    } catch (const std::invalid_argument& e) {
      ASSERT_TRUE(std::string(e.what()).find(moe::gguf::tensorTypeName(t)) != std::string::npos) << e.what();
    }
  }
  ASSERT_THROW(quant::dequantizeRow(TensorType::I16, row.data(), x.data(), 256), std::invalid_argument);
  ASSERT_THROW(quant::quantizeRow(TensorType::I32, x.data(), row.data(), 256), std::invalid_argument);
  ASSERT_THROW(quant::dequantizeRow(TensorType::I8, row.data(), x.data(), 64), std::invalid_argument);
}

TEST(Quant, partialBlockThrows) {
  std::vector<uint8_t> row(68, 0);
  std::vector<float> x(64, 1.0f);
  ASSERT_THROW(quant::dequantizeRow(TensorType::Q8_0, row.data(), x.data(), 40), std::invalid_argument);
  ASSERT_THROW(quant::dotRow(TensorType::Q4_0, row.data(), x.data(), 33), std::invalid_argument);
  std::vector<uint8_t> krow(210 * 2, 0);
  std::vector<float> kx(512, 1.0f);
  for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {  // rows of whole 256s
    ASSERT_THROW(quant::dequantizeRow(t, krow.data(), kx.data(), 288), std::invalid_argument);
    ASSERT_THROW(quant::dotRow(t, krow.data(), kx.data(), 32), std::invalid_argument);
  }
}
