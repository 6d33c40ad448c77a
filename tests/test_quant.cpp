// Element formats (models/quant.h): hand-written blocks with hand-computed values,
// f16/bf16 edge cases, reference-quantiser error bounds, dotRow against the
// dequantised dot, row sizes and unsupported types.
#include <QtTest/QtTest>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "models/gguf.h"
#include "models/quant.h"

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

}  // namespace

class TestQuant : public QObject {
  Q_OBJECT

 private slots:
  // ---- hand-written blocks -------------------------------------------------

  void f32Row() {
    // 1.5f = 0x3FC00000, -0.25f = 0xBE800000, little-endian.
    const uint8_t row[] = {0x00, 0x00, 0xC0, 0x3F, 0x00, 0x00, 0x80, 0xBE};
    float out[2];
    quant::dequantizeRow(TensorType::F32, row, out, 2);
    QCOMPARE(out[0], 1.5f);
    QCOMPARE(out[1], -0.25f);
  }

  void f16Row() {
    // 0x3C00 = 1.0, 0xC000 = -2.0, 0x0001 = 2^-24 (smallest subnormal),
    // 0x7BFF = 65504 (largest finite), 0x3555 = 0.333251953125 (1 + 341/1024) * 2^-2.
    const uint8_t row[] = {0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0xFF, 0x7B, 0x55, 0x35};
    float out[5];
    quant::dequantizeRow(TensorType::F16, row, out, 5);
    QCOMPARE(out[0], 1.0f);
    QCOMPARE(out[1], -2.0f);
    QCOMPARE(out[2], 0x1p-24f);
    QCOMPARE(out[3], 65504.0f);
    QCOMPARE(out[4], 0.333251953125f);
  }

  void bf16Row() {
    // 0x3F80 = 1.0, 0x40C0 = 6.0, 0xBF40 = -0.75 (the upper halves of the f32 bits).
    const uint8_t row[] = {0x80, 0x3F, 0xC0, 0x40, 0x40, 0xBF};
    float out[3];
    quant::dequantizeRow(TensorType::BF16, row, out, 3);
    QCOMPARE(out[0], 1.0f);
    QCOMPARE(out[1], 6.0f);
    QCOMPARE(out[2], -0.75f);
  }

  void q8_0Block() {
    // ggml block_q8_0: f16 d = 0x3800 (0.5), then int8 q[32].
    uint8_t blk[34] = {0x00, 0x38};
    const int8_t q[6] = {1, -2, 127, -128, 0, 3};
    std::memcpy(blk + 2, q, sizeof q);  // q[6..31] = 0
    // Expected d*q: 0.5, -1, 63.5, -64, 0, 1.5, then zeros.
    const float expected[6] = {0.5f, -1.0f, 63.5f, -64.0f, 0.0f, 1.5f};
    float out[32];
    quant::dequantizeRow(TensorType::Q8_0, blk, out, 32);
    for (int j = 0; j < 6; ++j) QCOMPARE(out[j], expected[j]);
    for (int j = 6; j < 32; ++j) QCOMPARE(out[j], 0.0f);
  }

  void q4_0Block() {
    // ggml block_q4_0: f16 d = 0x3800 (0.5), qs[16]; byte j: low nibble = element j,
    // high nibble = element j + 16; value = d * (nibble - 8).
    uint8_t blk[18] = {0x00, 0x38};
    std::memset(blk + 2, 0x88, 16);  // nibble 8 everywhere = 0.0
    blk[2 + 0] = 0x9F;               // element 0: 0.5*(15-8) =  3.5; element 16: 0.5*(9-8) =  0.5
    blk[2 + 1] = 0x08;               // element 1: 0.5*(8-8)  =  0.0; element 17: 0.5*(0-8) = -4.0
    blk[2 + 15] = 0x3A;              // element 15: 0.5*(10-8) = 1.0; element 31: 0.5*(3-8) = -2.5
    float out[32];
    quant::dequantizeRow(TensorType::Q4_0, blk, out, 32);
    QCOMPARE(out[0], 3.5f);
    QCOMPARE(out[16], 0.5f);
    QCOMPARE(out[1], 0.0f);
    QCOMPARE(out[17], -4.0f);
    QCOMPARE(out[15], 1.0f);
    QCOMPARE(out[31], -2.5f);
    for (int j : {2, 3, 10, 14, 18, 25, 30}) QCOMPARE(out[j], 0.0f);
  }

  void q8_0ReferenceQuantiser() {
    // x[j] = j - 16: amax = 16, d = 16/127, q = roundf(x * 127/16).
    std::vector<float> x(32);
    for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
    const auto blk = encode(TensorType::Q8_0, x);
    QCOMPARE(blk.size(), size_t{34});
    QCOMPARE(f16Of(blk.data()), quant::fp32ToFp16(16.0f / 127.0f));
    const auto* q = reinterpret_cast<const int8_t*>(blk.data() + 2);
    QCOMPARE(int(q[0]), -127);  // -16 * 7.9375
    QCOMPARE(int(q[16]), 0);
    QCOMPARE(int(q[17]), 8);    // 7.9375 rounds to 8
    QCOMPARE(int(q[18]), 16);   // 15.875
    QCOMPARE(int(q[31]), 119);  // 15 * 7.9375 = 119.0625
  }

  void q4_0ReferenceQuantiser() {
    // x[j] = j - 16: the largest magnitude is x[0] = -16, so max = -16, d = -16/-8 = 2,
    // id = 0.5, q = min(15, (int8)(x*0.5 + 8.5)).
    std::vector<float> x(32);
    for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
    const auto blk = encode(TensorType::Q4_0, x);
    QCOMPARE(blk.size(), size_t{18});
    QCOMPARE(f16Of(blk.data()), uint16_t{0x4000});  // 2.0
    // byte 0: q0 = (int)(0.5) = 0, q16 = (int)(8.5) = 8          -> 0x80
    // byte 1: q1 = (int)(1.0) = 1, q17 = (int)(9.0) = 9          -> 0x91
    // byte 15: q15 = (int)(8.0) = 8, q31 = min(15, 16) = 15      -> 0xF8
    QCOMPARE(int(blk[2 + 0]), 0x80);
    QCOMPARE(int(blk[2 + 1]), 0x91);
    QCOMPARE(int(blk[2 + 15]), 0xF8);
  }

  // ---- f16 / bf16 scalars --------------------------------------------------

  void fp16Encode() {
    QCOMPARE(quant::fp32ToFp16(0.0f), uint16_t{0x0000});
    QCOMPARE(quant::fp32ToFp16(-0.0f), uint16_t{0x8000});
    QCOMPARE(quant::fp32ToFp16(1.0f), uint16_t{0x3C00});
    QCOMPARE(quant::fp32ToFp16(65504.0f), uint16_t{0x7BFF});
    QCOMPARE(quant::fp32ToFp16(65519.0f), uint16_t{0x7BFF});  // below the 65520 midpoint
    QCOMPARE(quant::fp32ToFp16(65520.0f), uint16_t{0x7C00});  // tie, 0x7BFF is odd: up to inf
    QCOMPARE(quant::fp32ToFp16(1e9f), uint16_t{0x7C00});
    QCOMPARE(quant::fp32ToFp16(-1e9f), uint16_t{0xFC00});
    QCOMPARE(quant::fp32ToFp16(std::numeric_limits<float>::infinity()), uint16_t{0x7C00});
    QCOMPARE(quant::fp32ToFp16(-std::numeric_limits<float>::infinity()), uint16_t{0xFC00});
    const uint16_t nan = quant::fp32ToFp16(std::numeric_limits<float>::quiet_NaN());
    QCOMPARE(nan & 0x7C00, 0x7C00);
    QVERIFY((nan & 0x03FF) != 0);
    // A signalling NaN whose payload sits only in the low bits must stay NaN.
    QVERIFY((quant::fp32ToFp16(bitsToFloat(0x7F800001u)) & 0x03FF) != 0);
  }

  void fp16Subnormals() {
    QCOMPARE(quant::fp32ToFp16(0x1p-24f), uint16_t{0x0001});    // smallest subnormal
    QCOMPARE(quant::fp32ToFp16(0x1p-25f), uint16_t{0x0000});    // tie 0 / 2^-24: even = 0
    QCOMPARE(quant::fp32ToFp16(0x1.8p-25f), uint16_t{0x0001});  // 0.75 ulp: up
    QCOMPARE(quant::fp32ToFp16(0x1.8p-24f), uint16_t{0x0002});  // tie 1 / 2 ulps: even = 2
    QCOMPARE(quant::fp32ToFp16(0x1.4p-23f), uint16_t{0x0002});  // 2.5 ulps: tie, even = 2
    QCOMPARE(quant::fp32ToFp16(-0x1p-24f), uint16_t{0x8001});
    QCOMPARE(quant::fp32ToFp16(1e-10f), uint16_t{0x0000});
    // Midway between the largest subnormal (1023 * 2^-24) and 2^-14: 1023 is odd, so up.
    QCOMPARE(quant::fp32ToFp16(1023.5f * 0x1p-24f), uint16_t{0x0400});
    QCOMPARE(quant::fp16ToFp32(0x03FF), 1023.0f * 0x1p-24f);
    QCOMPARE(quant::fp16ToFp32(0x0400), 0x1p-14f);
  }

  void fp16NormalTies() {
    // 1 + 2^-11 is midway between 1.0 (mantissa 0, even) and 1 + 2^-10: down.
    QCOMPARE(quant::fp32ToFp16(1.0f + 0x1p-11f), uint16_t{0x3C00});
    // 1 + 3*2^-11 is midway between mantissa 1 (odd) and 2: up to 2.
    QCOMPARE(quant::fp32ToFp16(1.0f + 3 * 0x1p-11f), uint16_t{0x3C02});
    // Just above the midpoint rounds up.
    QCOMPARE(quant::fp32ToFp16(1.0f + 0x1p-11f + 0x1p-20f), uint16_t{0x3C01});
    // Mantissa carry into the exponent: 2 - 2^-12 -> 2.0.
    QCOMPARE(quant::fp32ToFp16(2.0f - 0x1p-12f), uint16_t{0x4000});
  }

  void fp16Decode() {
    QCOMPARE(quant::fp16ToFp32(0x0000), 0.0f);
    QVERIFY(std::signbit(quant::fp16ToFp32(0x8000)));
    QCOMPARE(quant::fp16ToFp32(0x7C00), std::numeric_limits<float>::infinity());
    QCOMPARE(quant::fp16ToFp32(0xFC00), -std::numeric_limits<float>::infinity());
    QVERIFY(std::isnan(quant::fp16ToFp32(0x7E00)));
    QVERIFY(std::isnan(quant::fp16ToFp32(0x7C01)));
    QCOMPARE(quant::fp16ToFp32(0xC000), -2.0f);
  }

  void fp16RoundTripAllCodes() {
    // Every f16 value is exact in f32, so decode -> encode must give the code back.
    for (uint32_t h = 0; h < 65536; ++h) {
      const float f = quant::fp16ToFp32(static_cast<uint16_t>(h));
      const uint16_t back = quant::fp32ToFp16(f);
      if (std::isnan(f)) {
        QVERIFY2((back & 0x7C00) == 0x7C00 && (back & 0x03FF) != 0, qPrintable(QString::number(h, 16)));
      } else if (back != h) {
        QFAIL(qPrintable(QStringLiteral("code 0x%1 came back as 0x%2").arg(h, 4, 16).arg(back, 4, 16)));
      }
    }
  }

  void bf16Conversions() {
    QCOMPARE(quant::fp32ToBf16(1.0f), uint16_t{0x3F80});
    QCOMPARE(quant::bf16ToFp32(0x3F80), 1.0f);
    // 0x3F808000 is midway between 0x3F80 (even) and 0x3F81: down.
    QCOMPARE(quant::fp32ToBf16(bitsToFloat(0x3F808000u)), uint16_t{0x3F80});
    // 0x3F818000 is midway between 0x3F81 (odd) and 0x3F82: up.
    QCOMPARE(quant::fp32ToBf16(bitsToFloat(0x3F818000u)), uint16_t{0x3F82});
    QCOMPARE(quant::fp32ToBf16(bitsToFloat(0x3F808001u)), uint16_t{0x3F81});
    QCOMPARE(quant::fp32ToBf16(-0.0f), uint16_t{0x8000});
    QCOMPARE(quant::fp32ToBf16(std::numeric_limits<float>::infinity()), uint16_t{0x7F80});
    QCOMPARE(quant::fp32ToBf16(std::numeric_limits<float>::max()), uint16_t{0x7F80});  // RNE overflow
    // A NaN whose payload is only in the low 16 bits must not truncate to inf.
    QVERIFY(std::isnan(quant::bf16ToFp32(quant::fp32ToBf16(bitsToFloat(0x7F800001u)))));
    QVERIFY(std::isnan(quant::bf16ToFp32(quant::fp32ToBf16(std::numeric_limits<float>::quiet_NaN()))));
  }

  // ---- quantise -> dequantise ---------------------------------------------

  void q8_0ErrorBound() {
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
        QVERIFY2(std::fabs(x[i] - y[i]) <= bound, qPrintable(QString::number(i)));
      }
    }
  }

  void q4_0ErrorBound() {
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
        QVERIFY2(std::fabs(x[i] - y[i]) <= bound, qPrintable(QString::number(i)));
      }
    }
  }

  void zeroBlocks() {
    // d = 0 must give id = 0 (no division by zero) and exact zeros back.
    const std::vector<float> x(64, 0.0f);
    for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0}) {
      const auto y = decode(t, encode(t, x), 64);
      for (float v : y) QCOMPARE(v, 0.0f);
    }
  }

  void plainTypesRoundTrip() {
    const auto x = randomFloats(37, 3, 2.0f);
    QCOMPARE(decode(TensorType::F32, encode(TensorType::F32, x), 37), x);
    const auto h = decode(TensorType::F16, encode(TensorType::F16, x), 37);
    const auto b = decode(TensorType::BF16, encode(TensorType::BF16, x), 37);
    for (size_t i = 0; i < x.size(); ++i) {
      QVERIFY(std::fabs(h[i] - x[i]) <= std::fabs(x[i]) * 0x1p-11f);  // half an f16 ulp
      QVERIFY(std::fabs(b[i] - x[i]) <= std::fabs(x[i]) * 0x1p-8f);   // half a bf16 ulp
    }
  }

  // ---- dotRow --------------------------------------------------------------

  void dotRow_data() {
    QTest::addColumn<int>("type");
    QTest::addColumn<int>("n");
    for (int n : {32, 64, 96, 4096}) {
      QTest::addRow("q8_0/%d", n) << int(TensorType::Q8_0) << n;
      QTest::addRow("q4_0/%d", n) << int(TensorType::Q4_0) << n;
    }
    for (int n : {1, 7, 32, 33, 100, 4096}) {
      QTest::addRow("f32/%d", n) << int(TensorType::F32) << n;
      QTest::addRow("f16/%d", n) << int(TensorType::F16) << n;
      QTest::addRow("bf16/%d", n) << int(TensorType::BF16) << n;
    }
  }

  void dotRow() {
    QFETCH(int, type);
    QFETCH(int, n);
    const auto t = static_cast<TensorType>(type);
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
    QVERIFY2(std::fabs(fast - exact) <= 1e-5 * magnitude, qPrintable(QString::number(fast - exact)));
    QVERIFY2(std::fabs(portable - exact) <= 1e-5 * magnitude, qPrintable(QString::number(portable - exact)));
    // The documented identity the batched matmul relies on: same summation order
    // for every type, so the encoded row and its F32 dequantisation give equal bits.
    const auto* deq_bytes = reinterpret_cast<const uint8_t*>(deq.data());
    QCOMPARE(fast, quant::dotRow(TensorType::F32, deq_bytes, x.data(), n));
    QCOMPARE(portable, quant::dotRowReference(TensorType::F32, deq_bytes, x.data(), n));
  }

  // ---- sizes and errors ----------------------------------------------------

  void rowBytesOfEachType() {
    QCOMPARE(moe::gguf::rowBytes(TensorType::F32, 64), uint64_t{256});
    QCOMPARE(moe::gguf::rowBytes(TensorType::F16, 64), uint64_t{128});
    QCOMPARE(moe::gguf::rowBytes(TensorType::BF16, 64), uint64_t{128});
    QCOMPARE(moe::gguf::rowBytes(TensorType::Q8_0, 64), uint64_t{68});  // 2 blocks x 34
    QCOMPARE(moe::gguf::rowBytes(TensorType::Q4_0, 64), uint64_t{36});  // 2 blocks x 18
    QCOMPARE(moe::gguf::rowBytes(TensorType::F16, 7), uint64_t{14});
    QVERIFY_THROWS_EXCEPTION(moe::gguf::GgufError, moe::gguf::rowBytes(TensorType::Q8_0, 33));
  }

  void computeSupport() {
    for (TensorType t :
         {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0, TensorType::Q4_0})
      QVERIFY(quant::isComputeSupported(t));
    for (TensorType t : {TensorType::Q4_K, TensorType::Q6_K, TensorType::MXFP4, TensorType::I32})
      QVERIFY(!quant::isComputeSupported(t));
  }

  void unsupportedTypeThrowsNamingIt() {
    std::vector<uint8_t> row(144 * 2, 0);
    std::vector<float> x(512, 1.0f);
    try {
      quant::dotRow(TensorType::Q4_K, row.data(), x.data(), 512);
      QFAIL("dotRow(Q4_K) did not throw");
    } catch (const std::invalid_argument& e) {
      QVERIFY2(std::string(e.what()).find("Q4_K") != std::string::npos, e.what());
    }
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             quant::dequantizeRow(TensorType::Q6_K, row.data(), x.data(), 256));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             quant::quantizeRow(TensorType::Q4_K, x.data(), row.data(), 256));
  }

  void partialBlockThrows() {
    std::vector<uint8_t> row(68, 0);
    std::vector<float> x(64, 1.0f);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             quant::dequantizeRow(TensorType::Q8_0, row.data(), x.data(), 40));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             quant::dotRow(TensorType::Q4_0, row.data(), x.data(), 33));
  }
};

QTEST_APPLESS_MAIN(TestQuant)
#include "test_quant.moc"
