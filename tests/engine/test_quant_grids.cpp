// The grid-coded IQ types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S):
// the lattice tables' shapes, every element of hand-built blocks (every grid entry,
// sign pattern, scale and delta) and of random blocks decoded as written here from the
// format's definition (the loops of ggml-quants.c's dequantize_row_iq*, in their order),
// the reference quantiser's error, the dot products against the dequantised rows, and,
// where a prebuilt llama.cpp is at hand, dequantisation bit for bit against its own.
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <unistd.h>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "quant/quant_grids.h"
#include "support/test_log.h"

using moe::gguf::TensorType;
namespace quant = moe::quant;
namespace grids = moe::quant::grids;

namespace {

const TensorType kGridTypes[] = {TensorType::IQ1_S,  TensorType::IQ1_M, TensorType::IQ2_XXS,
                                 TensorType::IQ2_XS, TensorType::IQ2_S, TensorType::IQ3_XXS,
                                 TensorType::IQ3_S};

const char* name(TensorType t) { return moe::gguf::tensorTypeName(t); }
uint16_t u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
void put16(uint8_t* p, uint16_t v) { p[0] = uint8_t(v), p[1] = uint8_t(v >> 8); }
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint8_t byteOf(uint64_t entry, int j) { return uint8_t(entry >> (8 * j)); }

// ksigns_iq2xs: the 7-bit index with an eighth bit that makes the minus signs even.
uint8_t ksign(int i) {
  int ones = 0;
  for (int b = 0; b < 7; ++b) ones += (i >> b) & 1;
  return uint8_t(i | ((ones & 1) << 7));
}
float sgn(uint8_t signs, int j) { return (signs >> j) & 1 ? -1.f : 1.f; }

// The definition, block by block.
std::vector<float> decodeByDefinition(TensorType t, const uint8_t* row, int64_t n) {
  std::vector<float> y;
  const auto traits = *moe::gguf::typeTraits(uint32_t(t));
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* x = row + b * traits.block_bytes;
    const float d = t == TensorType::IQ1_M ? 0.0f : quant::fp16ToFp32(u16(x));
    if (t == TensorType::IQ2_XXS) {
      for (int ib = 0; ib < 8; ++ib) {
        const uint8_t* q = x + 2 + 8 * ib;
        const uint32_t a1 = u32(q + 4);
        const float db = d * (0.5f + float(a1 >> 28)) * 0.25f;
        for (int l = 0; l < 4; ++l) {
          const uint64_t g = grids::kIq2xxsGrid[q[l]];
          const uint8_t s = ksign((a1 >> (7 * l)) & 127);
          for (int j = 0; j < 8; ++j) y.push_back(db * float(byteOf(g, j)) * sgn(s, j));
        }
      }
    } else if (t == TensorType::IQ2_XS || t == TensorType::IQ2_S) {
      const bool xs = t == TensorType::IQ2_XS;
      const uint8_t* scales = x + (xs ? 66 : 74);
      for (int ib = 0; ib < 8; ++ib) {
        const float db[2] = {d * (0.5f + float(scales[ib] & 15)) * 0.25f,
                             d * (0.5f + float(scales[ib] >> 4)) * 0.25f};
        for (int l = 0; l < 4; ++l) {
          uint64_t g;
          uint8_t s;
          if (xs) {
            const uint16_t v = u16(x + 2 + 2 * (4 * ib + l));
            g = grids::kIq2xsGrid[v & 511], s = ksign(v >> 9);
          } else {
            g = grids::kIq2sGrid[x[2 + 4 * ib + l] | ((x[66 + ib] << (8 - 2 * l)) & 0x300)];
            s = x[34 + 4 * ib + l];
          }
          for (int j = 0; j < 8; ++j) y.push_back(db[l / 2] * float(byteOf(g, j)) * sgn(s, j));
        }
      }
    } else if (t == TensorType::IQ3_XXS) {
      for (int ib = 0; ib < 8; ++ib) {
        const uint8_t* q = x + 2 + 8 * ib;
        const uint32_t a = u32(x + 66 + 4 * ib);
        const float db = d * (0.5f + float(a >> 28)) * 0.5f;
        for (int l = 0; l < 4; ++l) {
          const uint8_t s = ksign((a >> (7 * l)) & 127);
          const uint32_t g1 = grids::kIq3xxsGrid[q[2 * l]], g2 = grids::kIq3xxsGrid[q[2 * l + 1]];
          float out[8];
          for (int j = 0; j < 4; ++j) {
            out[j] = db * float(byteOf(g1, j)) * sgn(s, j);
            out[j + 4] = db * float(byteOf(g2, j)) * sgn(s, j + 4);
          }
          y.insert(y.end(), out, out + 8);
        }
      }
    } else if (t == TensorType::IQ3_S) {
      for (int ib = 0; ib < 8; ++ib) {
        const uint8_t* q = x + 2 + 8 * ib;
        const uint8_t qh = x[66 + ib];
        const float db = d * float(1 + 2 * ((x[106 + ib / 2] >> (4 * (ib % 2))) & 15));
        for (int l = 0; l < 4; ++l) {
          const uint32_t g1 = grids::kIq3sGrid[q[2 * l] | ((qh << (8 - 2 * l)) & 256)];
          const uint32_t g2 = grids::kIq3sGrid[q[2 * l + 1] | ((qh << (7 - 2 * l)) & 256)];
          const uint8_t s = x[74 + 4 * ib + l];
          float out[8];
          for (int j = 0; j < 4; ++j) {
            out[j] = db * float(byteOf(g1, j)) * sgn(s, j);
            out[j + 4] = db * float(byteOf(g2, j)) * sgn(s, j + 4);
          }
          y.insert(y.end(), out, out + 8);
        }
      }
    } else if (t == TensorType::IQ1_S) {
      for (int ib = 0; ib < 8; ++ib) {
        const uint16_t qh = u16(x + 34 + 2 * ib);
        const float dl = d * float(2 * ((qh >> 12) & 7) + 1);
        const float delta = qh & 0x8000 ? -0.125f : 0.125f;
        for (int l = 0; l < 4; ++l) {
          const uint64_t g = grids::kIq1sGrid[x[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
          for (int j = 0; j < 8; ++j) y.push_back(dl * (float(int8_t(byteOf(g, j))) + delta));
        }
      }
    } else if (t == TensorType::IQ1_M) {
      const uint8_t* sc = x + 48;
      const uint16_t dbits = uint16_t((u16(sc) >> 12) | ((u16(sc + 2) >> 8) & 0x00f0) |
                                      ((u16(sc + 4) >> 4) & 0x0f00) | (u16(sc + 6) & 0xf000));
      const float dm = quant::fp16ToFp32(dbits);
      for (int ib = 0; ib < 8; ++ib) {
        const uint16_t s = u16(sc + 2 * (ib / 2));
        const float dl1 = dm * float(2 * ((s >> (6 * (ib % 2))) & 7) + 1);
        const float dl2 = dm * float(2 * ((s >> (6 * (ib % 2) + 3)) & 7) + 1);
        const uint8_t* qs = x + 4 * ib;
        const uint8_t* qh = x + 32 + 2 * ib;
        const int idx[4] = {qs[0] | ((qh[0] << 8) & 0x700), qs[1] | ((qh[0] << 4) & 0x700),
                            qs[2] | ((qh[1] << 8) & 0x700), qs[3] | ((qh[1] << 4) & 0x700)};
        const float delta[4] = {qh[0] & 0x08 ? -0.125f : 0.125f, qh[0] & 0x80 ? -0.125f : 0.125f,
                                qh[1] & 0x08 ? -0.125f : 0.125f, qh[1] & 0x80 ? -0.125f : 0.125f};
        for (int l = 0; l < 4; ++l) {
          const uint64_t g = grids::kIq1sGrid[idx[l]];
          for (int j = 0; j < 8; ++j)
            y.push_back((l < 2 ? dl1 : dl2) * (float(int8_t(byteOf(g, j))) + delta[l]));
        }
      }
    }
  }
  return y;
}

uint16_t randomScale(std::mt19937& rng) {  // modest, finite, either sign
  return quant::fp32ToFp16(std::ldexp(float(rng() % 1000 + 1) / 1000.0f, -int(rng() % 8)) *
                           ((rng() & 1) ? 1.0f : -1.0f));
}

void setD(TensorType t, uint8_t* blk, uint16_t d) {
  if (t != TensorType::IQ1_M) return put16(blk, d);
  for (int i = 0; i < 4; ++i)
    put16(blk + 48 + 2 * i, uint16_t((u16(blk + 48 + 2 * i) & 0x0fff) | (((d >> (4 * i)) & 15) << 12)));
}

std::vector<uint8_t> randomBlocks(TensorType t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> row(moe::gguf::rowBytes(t, uint64_t(n)));
  for (auto& b : row) b = uint8_t(rng());
  const int bb = grids::blockBytes(t);
  for (size_t b = 0; b < row.size(); b += bb) setD(t, row.data() + b, randomScale(rng));
  return row;
}

// Blocks written field by field so that, over the row, every grid entry, every sign
// index (or sign byte), every scale code and both delta signs occur.
std::vector<uint8_t> handBuiltBlocks(TensorType t, int blocks) {
  const int bb = grids::blockBytes(t);
  std::vector<uint8_t> row(size_t(bb) * blocks, 0);
  std::mt19937 rng(7);
  int counter = 0;
  for (int b = 0; b < blocks; ++b) {
    uint8_t* x = row.data() + size_t(bb) * b;
    for (int ib = 0; ib < 8; ++ib) {
      for (int l = 0; l < 4; ++l, ++counter) {
        const int sign7 = counter % 128, sign8 = counter % 256, scale = counter % 16;
        switch (t) {
          case TensorType::IQ2_XXS: {
            x[2 + 8 * ib + l] = uint8_t(counter % 256);
            const uint32_t a =
                u32(x + 6 + 8 * ib) | uint32_t(sign7) << (7 * l) | uint32_t((ib + b) % 16) << 28;
            put32(x + 6 + 8 * ib, a);
            break;
          }
          case TensorType::IQ2_XS:
            put16(x + 2 + 2 * (4 * ib + l), uint16_t((counter % 512) | (sign7 << 9)));
            x[66 + ib] = uint8_t(scale | ((15 - scale) << 4));
            break;
          case TensorType::IQ2_S: {
            const int index = counter % 1024;
            x[2 + 4 * ib + l] = uint8_t(index);
            x[66 + ib] = uint8_t(x[66 + ib] | ((index >> 8) << (2 * l)));
            x[34 + 4 * ib + l] = uint8_t(sign8);
            x[74 + ib] = uint8_t(scale | ((15 - scale) << 4));
            break;
          }
          case TensorType::IQ3_XXS: {
            x[2 + 8 * ib + 2 * l] = uint8_t((2 * counter) % 256);
            x[2 + 8 * ib + 2 * l + 1] = uint8_t((2 * counter + 1) % 256);
            put32(x + 66 + 4 * ib,
                  u32(x + 66 + 4 * ib) | uint32_t(sign7) << (7 * l) | uint32_t((ib + b) % 16) << 28);
            break;
          }
          case TensorType::IQ3_S: {
            const int lo = (2 * counter) % 512, hi = (2 * counter + 1) % 512;
            x[2 + 8 * ib + 2 * l] = uint8_t(lo), x[2 + 8 * ib + 2 * l + 1] = uint8_t(hi);
            x[66 + ib] = uint8_t(x[66 + ib] | ((lo >> 8) << (2 * l)) | ((hi >> 8) << (2 * l + 1)));
            x[74 + 4 * ib + l] = uint8_t(sign8);
            x[106 + ib / 2] = uint8_t(x[106 + ib / 2] | (((ib + b) % 16) << (4 * (ib % 2))));
            break;
          }
          case TensorType::IQ1_S: {
            const int index = counter % 2048;
            x[2 + 4 * ib + l] = uint8_t(index);
            uint16_t h = uint16_t(u16(x + 34 + 2 * ib) | ((index >> 8) << (3 * l)));
            if (l == 0) h = uint16_t(h | (((ib + b) % 8) << 12) | (((ib + b) / 8) % 2 ? 0x8000 : 0));
            put16(x + 34 + 2 * ib, h);
            break;
          }
          case TensorType::IQ1_M: {
            const int index = counter % 2048;
            x[4 * ib + l] = uint8_t(index);
            const int nib = (index >> 8) | ((counter / 2048 + l) % 2 ? 8 : 0);
            x[32 + 2 * ib + l / 2] = uint8_t(x[32 + 2 * ib + l / 2] | (nib << (4 * (l % 2))));
            if (l == 0) {
              const int s1 = (ib + b) % 8, s2 = (ib + 3 * b + 1) % 8;
              put16(x + 48 + 2 * (ib / 2),
                    uint16_t(u16(x + 48 + 2 * (ib / 2)) | ((s1 | (s2 << 3)) << (6 * (ib % 2)))));
            }
            break;
          }
          default: break;
        }
      }
    }
    setD(t, x, randomScale(rng));
  }
  return row;
}

void expectSameBits(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], 4) != 0)
      FAIL() << moe::test::format("%s: element %zu is %.9g, the definition gives %.9g", what, i,
                                  double(got[i]), double(want[i]));
}

std::vector<float> normalFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace

TEST(QuantGrids, typesAreKnownAndComputed) {
  const struct {
    TensorType type;
    const char* name;
    uint32_t bytes;
  } rows[] = {{TensorType::IQ1_S, "IQ1_S", 50},     {TensorType::IQ1_M, "IQ1_M", 56},
              {TensorType::IQ2_XXS, "IQ2_XXS", 66}, {TensorType::IQ2_XS, "IQ2_XS", 74},
              {TensorType::IQ2_S, "IQ2_S", 82},     {TensorType::IQ3_XXS, "IQ3_XXS", 98},
              {TensorType::IQ3_S, "IQ3_S", 110}};
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    ASSERT_EQ(std::string(name(r.type)), r.name);
    ASSERT_EQ(moe::gguf::rowBytes(r.type, 512), uint64_t{2} * r.bytes);
    ASSERT_TRUE(quant::isComputeSupported(r.type));
    ASSERT_EQ(quant::activationFormat(r.type), quant::ActivationFormat::Q8_K);
    ASSERT_THROW(moe::gguf::rowBytes(r.type, 100), moe::gguf::GgufError);
  }
}

// The lattices as the formats define them: distinct entries, each byte one of the
// type's magnitudes (IQ2: 8, 25, 43; IQ3_XXS: 4..62; IQ3_S: odd 1..15; IQ1: -1, 0, 1).
TEST(QuantGrids, latticeTablesHaveTheirShapes) {
  auto check = [](const char* what, auto* table, int count, int width, std::set<int> allowed,
                  bool is_signed) {
    SCOPED_TRACE(what);
    std::set<uint64_t> seen;
    std::set<int> used;
    for (int e = 0; e < count; ++e) {
      ASSERT_TRUE(seen.insert(uint64_t(table[e])).second) << "entry " << e << " repeats";
      for (int j = 0; j < width; ++j) {
        const uint8_t byte = byteOf(uint64_t(table[e]), j);
        const int v = is_signed ? int(int8_t(byte)) : int(byte);
        ASSERT_TRUE(allowed.count(v)) << "entry " << e << " byte " << j << " = " << v;
        used.insert(v);
      }
    }
    ASSERT_EQ(used, allowed);  // every magnitude occurs
  };
  check("iq2xxs", grids::kIq2xxsGrid, 256, 8, {8, 25, 43}, false);
  check("iq2xs", grids::kIq2xsGrid, 512, 8, {8, 25, 43}, false);
  check("iq2s", grids::kIq2sGrid, 1024, 8, {8, 25, 43}, false);
  check("iq3xxs", grids::kIq3xxsGrid, 256, 4, {4, 12, 20, 28, 36, 44, 52, 62}, false);
  check("iq3s", grids::kIq3sGrid, 512, 4, {1, 3, 5, 7, 9, 11, 13, 15}, false);
  check("iq1s", grids::kIq1sGrid, 2048, 8, {-1, 0, 1}, true);
  // The first entries, as ggml-common.h lists them.
  ASSERT_EQ(grids::kIq2xxsGrid[1], 0x080808080808082bULL);
  ASSERT_EQ(grids::kIq1sGrid[1], 0xffffffffffffff01ULL);
  for (int i = 0; i < 128; ++i) ASSERT_EQ(grids::signBits(uint32_t(i)), ksign(i));
}

TEST(QuantGrids, handBuiltBlocksDecodeAsDefined) {
  for (TensorType t : kGridTypes) {
    SCOPED_TRACE(name(t));
    const int blocks = 2048 * 4 / 32;  // every entry of the largest grid, four times over
    const auto row = handBuiltBlocks(t, blocks);
    const int64_t n = 256LL * blocks;
    std::vector<float> got(n);
    quant::dequantizeRow(t, row.data(), got.data(), n);
    expectSameBits(got, decodeByDefinition(t, row.data(), n), name(t));
  }
}

TEST(QuantGrids, randomBlocksDecodeAsDefined) {
  for (TensorType t : kGridTypes) {
    SCOPED_TRACE(name(t));
    for (uint32_t seed = 1; seed <= 10; ++seed) {
      const int64_t n = 1024;
      const auto row = randomBlocks(t, n, seed);
      std::vector<float> got(n);
      quant::dequantizeRow(t, row.data(), got.data(), n);
      expectSameBits(got, decodeByDefinition(t, row.data(), n), name(t));
    }
  }
}

TEST(QuantGrids, quantiserError) {
  // Normalised mean squared error of dequantise(quantise(x)) for unit-normal x; the
  // bounds sit above what this simple quantiser reaches and well below 1 (all zeros).
  const struct {
    TensorType type;
    double bound;
  } rows[] = {{TensorType::IQ1_S, 0.45},  {TensorType::IQ1_M, 0.33}, {TensorType::IQ2_XXS, 0.17},
              {TensorType::IQ2_XS, 0.13}, {TensorType::IQ2_S, 0.09}, {TensorType::IQ3_XXS, 0.055},
              {TensorType::IQ3_S, 0.025}};
  for (const auto& r : rows) {
    SCOPED_TRACE(name(r.type));
    const int64_t n = 4096;
    const auto x = normalFloats(size_t(n), 5);
    std::vector<uint8_t> row(moe::gguf::rowBytes(r.type, uint64_t(n)));
    quant::quantizeRow(r.type, x.data(), row.data(), n);
    std::vector<float> y(n);
    quant::dequantizeRow(r.type, row.data(), y.data(), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) err += double(y[i] - x[i]) * (y[i] - x[i]), ref += double(x[i]) * x[i];
    moe::test::info("%s: NMSE %.4f (bound %.2f)", name(r.type), err / ref, r.bound);
    ASSERT_LT(err / ref, r.bound);
    const std::vector<float> zeros(256, 0.0f);
    std::vector<uint8_t> zrow(moe::gguf::rowBytes(r.type, 256));
    quant::quantizeRow(r.type, zeros.data(), zrow.data(), 256);
    std::vector<float> zy(256, 1.0f);
    quant::dequantizeRow(r.type, zrow.data(), zy.data(), 256);
    for (float v : zy) ASSERT_EQ(v, 0.0f);
  }
}

TEST(QuantGrids, dotRowIsTheDequantisedDot) {
  for (TensorType t : kGridTypes) {
    SCOPED_TRACE(name(t));
    for (int64_t n : {256, 1024, 2816}) {
      const auto row = randomBlocks(t, n, uint32_t(n));
      const auto x = normalFloats(size_t(n), 9);
      std::vector<float> w(n);
      quant::dequantizeRow(t, row.data(), w.data(), n);
      const auto* wb = reinterpret_cast<const uint8_t*>(w.data());
      ASSERT_EQ(quant::dotRow(t, row.data(), x.data(), n), quant::dotRow(TensorType::F32, wb, x.data(), n));
      ASSERT_EQ(quant::dotRowReference(t, row.data(), x.data(), n),
                quant::dotRowReference(TensorType::F32, wb, x.data(), n));
    }
  }
}

// The integer dot against Q8_K activations equals the double-precision dot of the
// dequantised weights with the dequantised activations, to float rounding.
TEST(QuantGrids, quantisedDotIsTheDequantisedDot) {
  for (TensorType t : kGridTypes) {
    SCOPED_TRACE(name(t));
    const int64_t n = 2048;
    const auto row = randomBlocks(t, n, 3);
    const auto x = normalFloats(size_t(n), 4);
    std::vector<uint8_t> act(quant::activationRowBytes(quant::ActivationFormat::Q8_K, n));
    quant::quantizeActivations(quant::DotIsa::Portable, quant::ActivationFormat::Q8_K, x.data(), n,
                               act.data());
    std::vector<float> w(n);
    quant::dequantizeRow(t, row.data(), w.data(), n);
    double want = 0, mag = 0;
    for (int64_t b = 0; b < n / 256; ++b) {
      const uint8_t* xb = act.data() + b * quant::kQ8_KActBytes;
      float dx;
      std::memcpy(&dx, xb, 4);
      for (int i = 0; i < 256; ++i) {
        const double term = double(w[256 * b + i]) * double(dx) * double(int8_t(xb[4 + i]));
        want += term, mag += std::fabs(term);
      }
    }
    const float got = quant::dotQuantized(quant::DotIsa::Portable, t, row.data(), act.data(), n);
    ASSERT_NEAR(double(got), want, 1e-5 * mag) << name(t);
  }
}

// llama.cpp's own dequantize_row_iq* (a prebuilt libggml-base.so: MOECHAT_GGML_BASE,
// or the peer tarball under ../shared/peers) on random blocks: every element's bits.
TEST(QuantGridsLlamaCpp, dequantisationMatchesLlamaCppBitForBit) {
  namespace fs = std::filesystem;
  std::string lib;
  fs::path extracted;
  if (const char* env = std::getenv("MOECHAT_GGML_BASE")) lib = env;
  if (lib.empty()) {
    const fs::path peers = fs::path(MOECHAT_TEST_DATA) / ".." / ".." / ".." / "shared" / "peers";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(peers, ec)) {
      const std::string file = e.path().filename().string();
      if (file.rfind("llama.cpp-", 0) != 0 || e.path().extension() != ".xz") continue;
      const fs::path dir = fs::temp_directory_path() / ("moechat-peer-" + std::to_string(::getpid()));
      fs::create_directories(dir);
      const std::string cmd = "tar xJf '" + e.path().string() + "' -C '" + dir.string() +
                              "' --wildcards 'llama/bin/libggml-base.so*' 2>/dev/null";
      extracted = dir;
      if (std::system(cmd.c_str()) == 0) lib = (dir / "llama" / "bin" / "libggml-base.so").string();
      break;
    }
  }
  if (lib.empty() || !fs::exists(lib)) {
    if (!extracted.empty()) fs::remove_all(extracted);
    GTEST_SKIP() << "no prebuilt llama.cpp (set MOECHAT_GGML_BASE)";
  }
  void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!extracted.empty()) fs::remove_all(extracted);  // a loaded library stays mapped
  if (!handle) GTEST_SKIP() << "cannot load " << lib << ": " << dlerror();
  using Dequantize = void (*)(const void*, float*, int64_t);
  const struct {
    TensorType type;
    const char* symbol;
  } cases[] = {
      {TensorType::IQ1_S, "dequantize_row_iq1_s"},     {TensorType::IQ1_M, "dequantize_row_iq1_m"},
      {TensorType::IQ2_XXS, "dequantize_row_iq2_xxs"}, {TensorType::IQ2_XS, "dequantize_row_iq2_xs"},
      {TensorType::IQ2_S, "dequantize_row_iq2_s"},     {TensorType::IQ3_XXS, "dequantize_row_iq3_xxs"},
      {TensorType::IQ3_S, "dequantize_row_iq3_s"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.symbol);
    auto theirs = reinterpret_cast<Dequantize>(dlsym(handle, c.symbol));
    ASSERT_NE(theirs, nullptr);
    const int64_t n = 256 * 1024;
    auto row = randomBlocks(c.type, n, 11);
    const auto hand = handBuiltBlocks(c.type, 256);
    std::memcpy(row.data(), hand.data(), hand.size());  // the first 256 blocks: every entry
    std::vector<float> ours(n), ref(n);
    quant::dequantizeRow(c.type, row.data(), ours.data(), n);
    theirs(row.data(), ref.data(), n);
    expectSameBits(ours, ref, c.symbol);
  }
}
