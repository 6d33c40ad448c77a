// The block types of K-quant mixes and of gpt-oss (Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4,
// Q2_K, Q3_K, IQ4_XS): every element of random blocks decoded as written here from
// the format's definition (the loops of ggml-quants.c's dequantize_row_*, in their
// order, with Q3_K's scale unpacking done with its masks), the reference quantisers'
// error, and dotRow against the dequantised dot.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "quant/quant.h"
#include "support/test_log.h"

using moe::gguf::TensorType;
namespace quant = moe::quant;

namespace {

const TensorType kTypes[] = {TensorType::Q4_1,  TensorType::Q5_0, TensorType::Q5_1, TensorType::IQ4_NL,
                             TensorType::MXFP4, TensorType::Q2_K, TensorType::Q3_K, TensorType::IQ4_XS};

const int kIq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
const float kFp4[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                        -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};  // e2m1

uint16_t u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
float h(const uint8_t* p) { return quant::fp16ToFp32(u16(p)); }

// Random bytes, with every f16 scale field set to a modest random value so the
// decoded values are finite and varied; the MXFP4 exponent stays near 127.
std::vector<uint8_t> randomBlocks(TensorType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> row(moe::gguf::rowBytes(t, uint64_t(n)));
  for (auto& b : row) b = uint8_t(rng());
  auto scale = [&](uint8_t* p) {
    const uint16_t v = quant::fp32ToFp16(std::ldexp(float(rng() % 1000 + 1) / 1000.0f, -int(rng() % 8)) *
                                         ((rng() & 1) ? 1.0f : -1.0f));
    p[0] = uint8_t(v), p[1] = uint8_t(v >> 8);
  };
  const auto traits = *moe::gguf::typeTraits(uint32_t(t));
  for (size_t b = 0; b < row.size(); b += traits.block_bytes) {
    uint8_t* blk = row.data() + b;
    switch (t) {
      case TensorType::Q4_1:
      case TensorType::Q5_1: scale(blk), scale(blk + 2); break;
      case TensorType::Q5_0:
      case TensorType::IQ4_NL:
      case TensorType::IQ4_XS: scale(blk); break;
      case TensorType::MXFP4: blk[0] = uint8_t(120 + rng() % 14); break;
      case TensorType::Q2_K: scale(blk + 80), scale(blk + 82); break;
      case TensorType::Q3_K: scale(blk + 108); break;
      default: break;
    }
  }
  return row;
}

// The definition, block by block, in the order the elements come out.
std::vector<float> decodeByDefinition(TensorType t, const std::vector<uint8_t>& row, int64_t n) {
  std::vector<float> y;
  const auto traits = *moe::gguf::typeTraits(uint32_t(t));
  for (int64_t b = 0; b < n / traits.block_elems; ++b) {
    const uint8_t* x = row.data() + b * traits.block_bytes;
    if (t == TensorType::Q4_1 || t == TensorType::Q5_1 || t == TensorType::Q5_0) {
      const bool has_m = t != TensorType::Q5_0, has_qh = t != TensorType::Q4_1;
      const float d = h(x), m = has_m ? h(x + 2) : 0.0f;
      const uint32_t qh = has_qh ? u32(x + (has_m ? 4 : 2)) : 0;
      const uint8_t* qs = x + (has_m ? 4 : 2) + (has_qh ? 4 : 0);
      float out[32];
      for (int j = 0; j < 16; ++j) {
        const int x0 = (qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10);
        const int x1 = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
        if (t == TensorType::Q5_0) {
          out[j] = float(x0 - 16) * d, out[j + 16] = float(x1 - 16) * d;
        } else {
          out[j] = float(x0) * d + m, out[j + 16] = float(x1) * d + m;
        }
      }
      y.insert(y.end(), out, out + 32);
    } else if (t == TensorType::IQ4_NL || t == TensorType::MXFP4) {
      const bool fp4 = t == TensorType::MXFP4;
      const float d = fp4 ? std::ldexp(1.0f, int(x[0]) - 127) : h(x);
      const uint8_t* qs = x + (fp4 ? 1 : 2);
      float out[32];
      for (int j = 0; j < 16; ++j) {
        out[j] = fp4 ? kFp4[qs[j] & 15] * d : d * float(kIq4[qs[j] & 15]);
        out[j + 16] = fp4 ? kFp4[qs[j] >> 4] * d : d * float(kIq4[qs[j] >> 4]);
      }
      y.insert(y.end(), out, out + 32);
    } else if (t == TensorType::IQ4_XS) {
      const float d = h(x);
      const uint16_t scales_h = u16(x + 2);
      const uint8_t* qs = x + 8;
      for (int ib = 0; ib < 8; ++ib) {
        const int ls = ((x[4 + ib / 2] >> 4 * (ib % 2)) & 0xf) | (((scales_h >> 2 * ib) & 3) << 4);
        const float dl = d * float(ls - 32);
        float out[32];
        for (int j = 0; j < 16; ++j)
          out[j] = dl * float(kIq4[qs[j] & 15]), out[j + 16] = dl * float(kIq4[qs[j] >> 4]);
        y.insert(y.end(), out, out + 32);
        qs += 16;
      }
    } else if (t == TensorType::Q2_K) {  // scales[16], qs[64], d, dmin
      const float d = h(x + 80), dmin = h(x + 82);
      const uint8_t* q = x + 16;
      int is = 0;
      for (int half = 0; half < 2; ++half, q += 32) {
        for (int shift = 0; shift < 8; shift += 2) {
          for (int part = 0; part < 2; ++part) {
            const uint8_t sc = x[is++];
            const float dl = d * float(sc & 0xF), ml = dmin * float(sc >> 4);
            for (int l = 0; l < 16; ++l) y.push_back(dl * float((q[l + 16 * part] >> shift) & 3) - ml);
          }
        }
      }
    } else if (t == TensorType::Q3_K) {  // hmask[32], qs[64], scales[12], d
      uint32_t aux[4];
      std::memcpy(aux, x + 96, 12);
      const uint32_t tmp = aux[2], kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
      aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
      aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
      aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
      aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
      int8_t scales[16];
      std::memcpy(scales, aux, 16);
      const float d = h(x + 108);
      const uint8_t* q = x + 32;
      const uint8_t* hm = x;
      uint8_t m = 1;
      int is = 0;
      for (int half = 0; half < 2; ++half, q += 32) {
        for (int shift = 0; shift < 8; shift += 2, m = uint8_t(m << 1)) {
          for (int part = 0; part < 2; ++part) {
            const float dl = d * float(scales[is++] - 32);
            for (int l = 16 * part; l < 16 * part + 16; ++l)
              y.push_back(dl * float(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4)));
          }
        }
      }
    }
  }
  return y;
}

std::vector<float> normalFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace

TEST(QuantTypes, typesAreKnownAndComputed) {
  ASSERT_EQ(moe::gguf::rowBytes(TensorType::IQ4_NL, 64), uint64_t{36});
  ASSERT_EQ(moe::gguf::rowBytes(TensorType::IQ4_XS, 512), uint64_t{272});
  ASSERT_EQ(moe::gguf::rowBytes(TensorType::Q3_K, 256), uint64_t{110});
  ASSERT_EQ(std::string(moe::gguf::tensorTypeName(TensorType::IQ4_XS)), std::string("IQ4_XS"));
  for (TensorType t : kTypes) ASSERT_TRUE(quant::isComputeSupported(t)) << moe::gguf::tensorTypeName(t);
}

namespace {

void checkBlocksDecodeAsDefined(TensorType t) {
  const int64_t n = 512;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const auto row = randomBlocks(t, n, seed);
    const auto want = decodeByDefinition(t, row, n);
    ASSERT_EQ(int64_t(want.size()), n);
    std::vector<float> got(n);
    quant::dequantizeRow(t, row.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i)
      if (got[i] != want[i])
        FAIL() << moe::test::format("seed %u element %lld: %.9g, the definition gives %.9g", seed,
                                    static_cast<long long>(i), double(got[i]), double(want[i]));
  }
}

}  // namespace

TEST(QuantTypes, blocksDecodeAsDefined) {
  for (TensorType t : kTypes) {
    SCOPED_TRACE(moe::gguf::tensorTypeName(t));
    checkBlocksDecodeAsDefined(t);
  }
}

namespace {

void checkQuantiserError(TensorType t, double bound) {
  const int64_t n = 4096;
  const auto x = normalFloats(size_t(n), 5);
  std::vector<uint8_t> row(moe::gguf::rowBytes(t, uint64_t(n)));
  quant::quantizeRow(t, x.data(), row.data(), n);
  std::vector<float> y(n);
  quant::dequantizeRow(t, row.data(), y.data(), n);
  double err = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i) err += double(y[i] - x[i]) * (y[i] - x[i]), ref += double(x[i]) * x[i];
  moe::test::info("%s: NMSE %.5f (bound %.3f)", moe::gguf::tensorTypeName(t), err / ref, bound);
  ASSERT_TRUE(err / ref < bound) << moe::test::format("%g", err / ref);
  // Zeros stay zeros.
  const std::vector<float> zeros(256, 0.0f);
  std::vector<uint8_t> zrow(moe::gguf::rowBytes(t, 256));
  quant::quantizeRow(t, zeros.data(), zrow.data(), 256);
  std::vector<float> zy(256, 1.0f);
  quant::dequantizeRow(t, zrow.data(), zy.data(), 256);
  for (float v : zy) ASSERT_FLOAT_EQ(v, 0.0f);
}

}  // namespace

TEST(QuantTypes, quantiserError) {
  // Normalised mean squared error of dequantise(quantise(x)) for unit-normal x: the
  // bounds sit above what these simple grids reach and far below 1 (all zeros).
  const struct {
    const char* name;
    TensorType type;
    double bound;
  } rows[] = {
      {"Q4_1", TensorType::Q4_1, 0.02},   {"Q5_0", TensorType::Q5_0, 0.005},
      {"Q5_1", TensorType::Q5_1, 0.005},  {"IQ4_NL", TensorType::IQ4_NL, 0.02},
      {"MXFP4", TensorType::MXFP4, 0.05}, {"Q2_K", TensorType::Q2_K, 0.2},
      {"Q3_K", TensorType::Q3_K, 0.06},   {"IQ4_XS", TensorType::IQ4_XS, 0.02},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    checkQuantiserError(row.type, row.bound);
  }
}

TEST(QuantTypes, dotRowIsTheDequantisedDot) {
  for (TensorType t : kTypes) {
    for (int64_t n : {256, 1024, 2816}) {
      const auto row = randomBlocks(t, n, uint32_t(n));
      const auto x = normalFloats(size_t(n), 9);
      std::vector<float> w(n);
      quant::dequantizeRow(t, row.data(), w.data(), n);
      const float want =
          quant::dotRow(TensorType::F32, reinterpret_cast<const uint8_t*>(w.data()), x.data(), n);
      ASSERT_EQ(quant::dotRow(t, row.data(), x.data(), n), want);
      ASSERT_EQ(
          quant::dotRowReference(t, row.data(), x.data(), n),
          quant::dotRowReference(TensorType::F32, reinterpret_cast<const uint8_t*>(w.data()), x.data(), n));
    }
  }
}
