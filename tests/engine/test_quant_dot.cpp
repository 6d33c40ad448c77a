// The integer dot kernels (quant/quant_dot.h): the activation quantisers field by
// field, every kernel against a double-precision sum of the same quantised values,
// and every instruction set this CPU can run bit for bit against the portable
// kernels, for odd tile shapes (rows and activations not multiples of the tile, one
// activation, 511 activations), also through the CPU backend's matmul. The
// interleaved row groups (quant/quant_repack.h): an exact round trip, and every
// group kernel and the backend's repacked weights give the file layout's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "inference/cpu/cpu_backend.h"
#include "models/gguf.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "quant/quant_repack.h"
#include "support/engine_fixture.h"
#include "support/test_log.h"

using moe::gguf::TensorType;
namespace quant = moe::quant;
using quant::ActivationFormat;
using quant::DotIsa;

namespace {

const TensorType kTypes[] = {TensorType::Q8_0,   TensorType::Q4_0,  TensorType::Q4_K,    TensorType::Q5_K,
                             TensorType::Q6_K,   TensorType::Q4_1,  TensorType::Q5_0,    TensorType::Q5_1,
                             TensorType::IQ4_NL, TensorType::MXFP4, TensorType::Q2_K,    TensorType::Q3_K,
                             TensorType::IQ4_XS, TensorType::IQ1_S, TensorType::IQ1_M,   TensorType::IQ2_XXS,
                             TensorType::IQ2_XS, TensorType::IQ2_S, TensorType::IQ3_XXS, TensorType::IQ3_S};

// The types with an interleaved layout (quant_repack.h), in this order.
const TensorType kRepackedTypes[] = {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q5_K,
                                     TensorType::Q6_K};

bool isBlock32(TensorType t) { return moe::gguf::typeTraits(uint32_t(t))->block_elems == 32; }

std::vector<DotIsa> availableIsas() {
  std::vector<DotIsa> isas;
  for (DotIsa isa : {DotIsa::Portable, DotIsa::Avx2, DotIsa::Avx512})
    if (quant::dotIsaAvailable(isa)) isas.push_back(isa);
  return isas;
}

struct Operands {
  int64_t n = 0;
  size_t row_bytes = 0, act_bytes = 0;
  std::vector<uint8_t> rows;  // [nr][row_bytes]
  std::vector<uint8_t> act;   // [nt][act_bytes]
};

Operands makeOperands(TensorType t, int nr, int nt, int64_t n, uint32_t seed) {
  Operands o;
  o.n = n;
  o.row_bytes = moe::gguf::rowBytes(t, n);
  const auto format = quant::activationFormat(t);
  o.act_bytes = quant::activationRowBytes(format, n);
  const auto w = randomFloats(size_t(nr) * n, seed);
  const auto x = randomFloats(size_t(nt) * n, seed + 1, -3.0f, 3.0f);
  o.rows.resize(o.row_bytes * nr);
  o.act.resize(o.act_bytes * nt);
  for (int r = 0; r < nr; ++r) quant::quantizeRow(t, w.data() + r * n, o.rows.data() + r * o.row_bytes, n);
  for (int i = 0; i < nt; ++i)
    quant::quantizeActivations(format, x.data() + i * n, n, o.act.data() + i * o.act_bytes);
  return o;
}

// The values a quantised activation row stands for.
std::vector<float> activationValues(ActivationFormat f, const uint8_t* act, int64_t n) {
  std::vector<float> v(n);
  if (f == ActivationFormat::Q8_0) {  // the same layout as a Q8_0 weight row
    quant::dequantizeRow(TensorType::Q8_0, act, v.data(), n);
    return v;
  }
  for (int64_t b = 0; b < n / 256; ++b) {
    const uint8_t* blk = act + b * quant::kQ8_KActBytes;
    float d;
    std::memcpy(&d, blk, 4);
    for (int j = 0; j < 256; ++j) v[b * 256 + j] = d * float(int8_t(blk[4 + j]));
  }
  return v;
}

std::vector<float> tile(DotIsa isa, TensorType t, const Operands& o, int nr, int nt) {
  std::vector<float> y(size_t(nr) * nt, NAN);
  quant::dotTile(isa, t, o.rows.data(), o.row_bytes, nr, o.act.data(), o.act_bytes, nt, o.n, y.data(), nr);
  return y;
}

}  // namespace

class QuantDot : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string names;
    for (DotIsa isa : availableIsas()) names += std::string(quant::dotIsaName(isa)) + " ";
    moe::test::info("instruction sets this CPU runs: %s(best: %s)", names.c_str(),
                    quant::dotIsaName(quant::bestDotIsa()));
    ASSERT_TRUE(quant::dotIsaAvailable(DotIsa::Portable));
    ASSERT_TRUE(quant::dotIsaAvailable(quant::bestDotIsa()));
  }
};

// ---- activation quantisers -------------------------------------------------

TEST_F(QuantDot, q8_0Activations) {
  // d = f16(amax / 127), q = x / d rounded to nearest (the unrounded d divides).
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = 0.25f * float(i - 20);
  std::vector<uint8_t> blk(quant::activationRowBytes(ActivationFormat::Q8_0, 64));
  ASSERT_EQ(blk.size(), size_t{2 * 34 + 2 * 4 + 2 * 4});  // blocks, then d as f32, then sums
  quant::quantizeActivations(ActivationFormat::Q8_0, x.data(), 64, blk.data());
  for (int b = 0; b < 2; ++b) {
    uint16_t hb;
    std::memcpy(&hb, blk.data() + 34 * b, 2);
    float d32;
    int32_t sum;
    std::memcpy(&d32, blk.data() + 68 + 4 * b, 4);
    std::memcpy(&sum, blk.data() + 76 + 4 * b, 4);
    ASSERT_FLOAT_EQ(d32, quant::fp16ToFp32(hb));
    int expect = 0;
    for (int j = 0; j < 32; ++j) expect += int8_t(blk[34 * b + 2 + j]);
    ASSERT_EQ(sum, expect);
  }
  const float d0 = 5.0f / 127.0f;  // block 0: amax = |x[0]| = 5
  uint16_t h;
  std::memcpy(&h, blk.data(), 2);
  ASSERT_EQ(h, quant::fp32ToFp16(d0));
  for (int j = 0; j < 32; ++j) ASSERT_EQ(int(int8_t(blk[2 + j])), int(std::nearbyint(x[j] * (1.0f / d0))));
  ASSERT_EQ(int(int8_t(blk[2])), -127);
}

TEST_F(QuantDot, q8_KActivations) {
  // The signed element of largest magnitude maps to -127 (d = -max / 127, so d is
  // negative when that element is positive); bsums are the sums of 16 quants.
  std::vector<float> x(512);
  for (int i = 0; i < 512; ++i) x[i] = std::sin(0.37f * float(i)) * (i < 256 ? 2.0f : -0.5f);
  x[100] = 4.0f;   // block 0's largest: positive
  x[300] = -1.5f;  // block 1's largest: negative
  x[301] = 1.5f;   // same magnitude, later: the first one counts
  std::vector<uint8_t> act(quant::activationRowBytes(ActivationFormat::Q8_K, 512));
  ASSERT_EQ(act.size(), size_t{2 * 292});
  quant::quantizeActivations(ActivationFormat::Q8_K, x.data(), 512, act.data());
  for (int b = 0; b < 2; ++b) {
    const uint8_t* blk = act.data() + b * 292;
    float d;
    std::memcpy(&d, blk, 4);
    const float max = b == 0 ? 4.0f : -1.5f;
    ASSERT_FLOAT_EQ(d, 1.0f / (-127.0f / max));
    ASSERT_EQ(int(int8_t(blk[4 + (b == 0 ? 100 : 300 - 256)])), -127);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += int8_t(blk[4 + 16 * g + j]);
      int16_t stored;
      std::memcpy(&stored, blk + 260 + 2 * g, 2);
      ASSERT_EQ(int(stored), sum);
    }
  }
  ASSERT_EQ(int(int8_t(act[292 + 4 + 45])), 127);  // x[301] = -max: +127, no overflow
  std::vector<float> zeros(256, 0.0f);
  quant::quantizeActivations(ActivationFormat::Q8_K, zeros.data(), 256, act.data());
  for (int i = 0; i < 292; ++i) ASSERT_EQ(int(act[i]), 0);
}

TEST_F(QuantDot, everyIsaQuantisesToTheSameBytes) {
  // Random rows with a zero block, exact ties (x = d * (k + 0.5)) and a repeated
  // largest magnitude of both signs.
  for (ActivationFormat f : {ActivationFormat::Q8_0, ActivationFormat::Q8_K}) {
    const int64_t n = 1024;
    auto x = randomFloats(n, 77, -3.0f, 3.0f);
    std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
    for (int j = 0; j < 32; ++j) x[512 + j] = 0.5f * float(j - 16) + 0.25f;
    x[700] = 5.0f, x[701] = -5.0f, x[900] = -4.0f, x[950] = 4.0f;
    std::vector<uint8_t> portable(quant::activationRowBytes(f, n));
    quant::quantizeActivations(DotIsa::Portable, f, x.data(), n, portable.data());
    for (DotIsa isa : availableIsas()) {
      std::vector<uint8_t> got(portable.size(), 0xAA);
      quant::quantizeActivations(isa, f, x.data(), n, got.data());
      ASSERT_TRUE(got == portable) << quant::dotIsaName(isa);
    }
  }
}

TEST_F(QuantDot, activationFormats) {
  ASSERT_EQ(quant::activationFormat(TensorType::F16), ActivationFormat::None);
  ASSERT_EQ(quant::activationFormat(TensorType::Q4_0), ActivationFormat::Q8_0);
  ASSERT_EQ(quant::activationFormat(TensorType::Q6_K), ActivationFormat::Q8_K);
  ASSERT_THROW(quant::activationFormat(TensorType::I16), std::invalid_argument);
  std::vector<float> x(100);
  std::vector<uint8_t> out(1000);
  ASSERT_THROW(quant::quantizeActivations(ActivationFormat::Q8_K, x.data(), 100, out.data()),
               std::invalid_argument);
}

// ---- kernels ---------------------------------------------------------------

namespace {

void checkMatchesDoubleSum(TensorType t, int n) {
  // Integer products are exact, so the kernels differ from the double sum of the
  // dequantised weights times the dequantised activations only by float rounding
  // of the per-block scaling and accumulation: within 1e-6 of sum |w x|.
  const int nr = 5, nt = 3;
  const Operands o = makeOperands(t, nr, nt, n, 40 + n);
  for (DotIsa isa : availableIsas()) {
    const auto y = tile(isa, t, o, nr, nt);
    for (int i = 0; i < nt; ++i) {
      const auto x = activationValues(quant::activationFormat(t), o.act.data() + i * o.act_bytes, n);
      for (int r = 0; r < nr; ++r) {
        std::vector<float> w(n);
        quant::dequantizeRow(t, o.rows.data() + r * o.row_bytes, w.data(), n);
        double exact = 0, magnitude = 0;
        for (int k = 0; k < n; ++k) {
          exact += double(w[k]) * x[k];
          magnitude += std::fabs(double(w[k]) * x[k]);
        }
        const double err = std::fabs(y[i * nr + r] - exact);
        ASSERT_TRUE(err <= 1e-6 * magnitude) << moe::test::format(
            "%s row %d act %d: %g vs %g", quant::dotIsaName(isa), r, i, double(y[i * nr + r]), exact);
      }
    }
  }
}

}  // namespace

TEST_F(QuantDot, matchesDoubleSum) {
  for (TensorType t : kTypes)
    for (int n : {256, 768, 4096}) {
      SCOPED_TRACE(moe::test::format("%s/%d", moe::gguf::tensorTypeName(t), n));
      checkMatchesDoubleSum(t, n);
    }
}

namespace {

struct TileCase {
  std::string name;
  TensorType type;
  int nr, nt, n;
};

std::vector<TileCase> tileCases() {
  std::vector<TileCase> rows;
  for (TensorType t : kTypes) {
    const char* name = moe::gguf::tensorTypeName(t);
    for (int nr : {1, 2, 3, 4, 5, 7, 17})
      for (int nt : {1, 2, 3, 5})
        rows.push_back({moe::test::format("%s/%dx%d", name, nr, nt), t, nr, nt, 512});
    rows.push_back({moe::test::format("%s/67x511", name), t, 67, 511, 256});
    rows.push_back({moe::test::format("%s/3x1 wide", name), t, 3, 1, 11 * 256});
    // 11 blocks of 32: kernels that take blocks in fours have a tail of three.
    if (isBlock32(t)) rows.push_back({moe::test::format("%s/5x3 odd blocks", name), t, 5, 3, 11 * 32});
  }
  return rows;
}

void checkSameBits(TensorType t, int nr, int nt, int n) {
  const Operands o = makeOperands(t, nr, nt, n, 7 * nr + nt);
  // The definition: each pair alone on the portable kernels.
  std::vector<float> pairs(size_t(nr) * nt);
  for (int i = 0; i < nt; ++i)
    for (int r = 0; r < nr; ++r)
      pairs[i * nr + r] = quant::dotQuantized(DotIsa::Portable, t, o.rows.data() + r * o.row_bytes,
                                              o.act.data() + i * o.act_bytes, n);
  for (DotIsa isa : availableIsas()) {
    const auto y = tile(isa, t, o, nr, nt);
    for (size_t i = 0; i < y.size(); ++i)
      if (y[i] != pairs[i])
        FAIL() << moe::test::format("%s: output %zu (row %zu, act %zu) %.9g != portable pair %.9g",
                                    quant::dotIsaName(isa), i, i % nr, i / nr, double(y[i]),
                                    double(pairs[i]));
  }
}

}  // namespace

TEST_F(QuantDot, everyIsaAndTileGivesTheSameBits) {
  for (const TileCase& c : tileCases()) {
    SCOPED_TRACE(c.name);
    checkSameBits(c.type, c.nr, c.nt, c.n);
  }
}

TEST_F(QuantDot, extremeValuesStayExact) {
  // The largest integer partial sums the layouts allow (all quants at their
  // extremes, activations at +-127) must not saturate a 16-bit step: the result
  // equals the double sum exactly (every term and partial sum is an exact float).
  for (TensorType t : kTypes) {
    const int64_t n = 256;
    Operands o;
    o.n = n;
    o.row_bytes = moe::gguf::rowBytes(t, n);
    o.rows.assign(o.row_bytes, 0xff);  // every quant, scale and min at its largest code
    // Scales of 1.0 (f16 0x3C00) where the layout keeps them.
    auto putF16 = [&](size_t at) { o.rows[at] = 0x00, o.rows[at + 1] = 0x3C; };
    if (t == TensorType::Q8_0 || t == TensorType::Q4_0)
      for (size_t b = 0; b < o.row_bytes; b += (t == TensorType::Q8_0 ? 34 : 18)) putF16(b);
    if (t == TensorType::Q8_0)  // int8 -128 is the extreme of a Q8_0 quant
      for (size_t b = 0; b < o.row_bytes; b += 34) std::memset(&o.rows[b + 2], 0x80, 32);
    if (t == TensorType::Q4_K || t == TensorType::Q5_K) putF16(0), putF16(2);
    if (t == TensorType::Q6_K) {
      putF16(208);
      std::memset(&o.rows[192], 0x80, 16);  // scales -128
    }
    const size_t block_bytes = moe::gguf::typeTraits(uint32_t(t))->block_bytes;
    for (size_t b = 0; b < o.row_bytes; b += block_bytes) {
      switch (t) {
        case TensorType::Q4_1:
        case TensorType::Q5_1: putF16(b), putF16(b + 2); break;
        case TensorType::Q5_0:
        case TensorType::IQ4_NL:
        case TensorType::IQ4_XS:
        case TensorType::IQ1_S:
        case TensorType::IQ2_XXS:
        case TensorType::IQ2_XS:
        case TensorType::IQ2_S:
        case TensorType::IQ3_XXS:
        case TensorType::IQ3_S: putF16(b); break;
        case TensorType::IQ1_M:  // d = 1.0 (f16 0x3C00): its nibbles in the four scales' top nibbles
          for (int i = 0; i < 4; ++i)
            o.rows[b + 49 + 2 * i] = uint8_t(0x0f | (((0x3C00 >> (4 * i)) & 15) << 4));
          break;
        case TensorType::MXFP4: o.rows[b] = 128; break;  // scale 2^(128-128) on the doubled values
        case TensorType::Q2_K: putF16(b + 80), putF16(b + 82); break;
        case TensorType::Q3_K:  // hmask clear: every quant at -4; scales at their extreme -32
          putF16(b + 108);
          std::memset(&o.rows[b], 0, 32);
          std::memset(&o.rows[b + 96], 0, 12);
          break;
        default: break;
      }
    }
    const std::vector<float> x(n, 1.0f);  // activations of magnitude 127 after quantisation
    const auto format = quant::activationFormat(t);
    o.act_bytes = quant::activationRowBytes(format, n);
    o.act.resize(o.act_bytes);
    quant::quantizeActivations(format, x.data(), n, o.act.data());
    std::vector<float> w(n);
    quant::dequantizeRow(t, o.rows.data(), w.data(), n);
    const auto xv = activationValues(format, o.act.data(), n);
    double exact = 0;
    for (int k = 0; k < n; ++k) exact += double(w[k]) * xv[k];
    for (DotIsa isa : availableIsas()) {
      const float y = quant::dotQuantized(isa, t, o.rows.data(), o.act.data(), n);
      ASSERT_TRUE(std::fabs(y - exact) <= 1e-6 * std::fabs(exact)) << moe::test::format(
          "%s %s: %g vs %g", moe::gguf::tensorTypeName(t), quant::dotIsaName(isa), double(y), exact);
    }
  }
}

TEST_F(QuantDot, unavailableIsaOrFloatTypeIsRefused) {
  const Operands o = makeOperands(TensorType::Q8_0, 1, 1, 32, 1);
  float y = 0;
  ASSERT_THROW(quant::dotTile(DotIsa::Portable, TensorType::F16, o.rows.data(), 64, 1, o.act.data(), 128, 1,
                              32, &y, 1),
               std::invalid_argument);
  for (DotIsa isa : {DotIsa::Avx2, DotIsa::Avx512}) {
    if (!quant::dotIsaAvailable(isa)) {
      ASSERT_THROW(quant::dotQuantized(isa, TensorType::Q8_0, o.rows.data(), o.act.data(), 32),
                   std::invalid_argument);
    }
  }
}

// ---- interleaved row groups -------------------------------------------------

TEST_F(QuantDot, q8_0GroupLayoutByHand) {
  // Two blocks of eight rows, every quant distinct within its row and block and of
  // both signs (quantAt), row r's scale 2^r (f16 0x3C00 + r * 0x0400). The group
  // block keeps the eight scales first, then run j's 64 bytes hold each row's
  // bytes 8j..8j+7, rows in order.
  const int64_t n = 64;
  const size_t row_bytes = moe::gguf::rowBytes(TensorType::Q8_0, n);
  ASSERT_EQ(row_bytes, size_t{68});
  std::vector<uint8_t> rows(8 * row_bytes);
  auto quantAt = [](int r, int b, int i) { return int8_t(r * 13 - 50 + b * 40 + i - (i % 2 ? 0 : 2 * i)); };
  for (int r = 0; r < 8; ++r)
    for (int b = 0; b < 2; ++b) {
      uint8_t* blk = rows.data() + r * row_bytes + b * 34;
      const uint16_t d = uint16_t(0x3C00 + 0x0400 * r);  // 2^r
      blk[0] = uint8_t(d & 0xff), blk[1] = uint8_t(d >> 8);
      for (int i = 0; i < 32; ++i) blk[2 + i] = uint8_t(quantAt(r, b, i));
    }
  ASSERT_EQ(quant::repackedGroupBytes(TensorType::Q8_0, n), size_t{2 * 272});
  std::vector<uint8_t> group(2 * 272);
  quant::repackRows(TensorType::Q8_0, rows.data(), row_bytes, n, group.data());
  for (int b = 0; b < 2; ++b) {
    const uint8_t* gb = group.data() + 272 * b;
    for (int r = 0; r < 8; ++r) {
      ASSERT_EQ(gb[2 * r], 0x00);
      ASSERT_EQ(gb[2 * r + 1], uint8_t(0x3C + 4 * r)) << r;
      for (int j = 0; j < 4; ++j)
        for (int i = 0; i < 8; ++i)
          ASSERT_EQ(int8_t(gb[16 + 64 * j + 8 * r + i]), quantAt(r, b, 8 * j + i))
              << moe::test::format("block %d row %d byte %d", b, r, 8 * j + i);
    }
  }
  // Activations whose scales are exactly 1 (largest |x| = 127 per block), so row r's dot is
  // 2^r times an integer sum, exact in float: every group kernel must give it.
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = i % 32 == 5 ? -127.0f : float((i * 37) % 61 - 30);
  const size_t act_bytes = quant::activationRowBytes(ActivationFormat::Q8_0, n);
  std::vector<uint8_t> act(act_bytes);
  quant::quantizeActivations(ActivationFormat::Q8_0, x.data(), n, act.data());
  ASSERT_EQ(act[0], 0x00);
  ASSERT_EQ(act[1], 0x3C);  // d = 1.0
  for (DotIsa isa : availableIsas()) {
    std::vector<float> y(8, NAN);
    quant::dotGroups(isa, TensorType::Q8_0, group.data(), group.size(), 1, act.data(), act_bytes, 1, n,
                     y.data(), 8);
    for (int r = 0; r < 8; ++r) {
      int64_t sum = 0;
      for (int i = 0; i < n; ++i) sum += int64_t(quantAt(r, i / 32, i % 32)) * int64_t(x[i]);
      ASSERT_EQ(double(y[r]), double(sum) * double(1 << r))
          << moe::test::format("%s row %d", quant::dotIsaName(isa), r);
    }
  }
}

TEST_F(QuantDot, kQuantGroupLayoutsByHand) {
  // Where every byte of a Q5_K and a Q6_K block goes, written out from the layout
  // quant_repack.h documents (Q5_K's packed scales, stored unpacked as Q4_K's, are
  // checked through the round trip and the kernels): eight rows of two blocks of
  // random bytes, each group byte compared with the file byte it must hold.
  struct Place {
    size_t group, file, bytes;
  };
  auto places = [](TensorType t, int r) {
    std::vector<Place> p;
    if (t == TensorType::Q6_K) {  // file: ql[128] qh[64] scales[16] d
      p.push_back({size_t(2 * r), 208, 2});
      for (int s = 0; s < 16; ++s) p.push_back({size_t(16 + 8 * s + r), size_t(192 + s), 1});
      for (int i = 0; i < 128; i += 4)  // ql byte i: half i / 64, chunk (i % 32) / 4, run (i / 32) % 2
        p.push_back(
            {size_t(144 + 768 * (i / 64) + 96 * ((i % 32) / 4) + 32 * ((i / 32) % 2) + 4 * r), size_t(i), 4});
      for (int i = 0; i < 64; i += 4)  // qh byte i: half i / 32
        p.push_back({size_t(144 + 768 * (i / 32) + 96 * ((i % 32) / 4) + 64 + 4 * r), size_t(128 + i), 4});
    } else {  // Q5_K file: d dmin scales[12] qh[32] qs[128]
      p.push_back({size_t(2 * r), 0, 2});
      p.push_back({size_t(16 + 2 * r), 2, 2});
      for (int i = 0; i < 32; i += 4) p.push_back({size_t(160 + 32 * (i / 4) + 4 * r), size_t(16 + i), 4});
      for (int i = 0; i < 128; i += 4)
        p.push_back({size_t(416 + 256 * (i / 32) + 32 * ((i % 32) / 4) + 4 * r), size_t(48 + i), 4});
    }
    return p;
  };
  for (TensorType t : {TensorType::Q5_K, TensorType::Q6_K}) {
    SCOPED_TRACE(moe::gguf::tensorTypeName(t));
    const int64_t n = 512;
    const size_t row_bytes = moe::gguf::rowBytes(t, n), file_block = row_bytes / 2;
    const size_t group_block = t == TensorType::Q6_K ? 1680 : 1440;
    std::vector<uint8_t> rows(8 * row_bytes);
    uint32_t state = 777;
    for (auto& b : rows) b = uint8_t((state = state * 1664525u + 1013904223u) >> 24);
    std::vector<uint8_t> group(quant::repackedGroupBytes(t, n));
    ASSERT_EQ(group.size(), 2 * group_block);
    quant::repackRows(t, rows.data(), row_bytes, n, group.data());
    size_t covered = 0;
    for (int b = 0; b < 2; ++b)
      for (int r = 0; r < 8; ++r)
        for (const Place& p : places(t, r)) {
          covered += b == 0 ? p.bytes : 0;
          for (size_t i = 0; i < p.bytes; ++i)
            ASSERT_EQ(group[b * group_block + p.group + i], rows[r * row_bytes + b * file_block + p.file + i])
                << moe::test::format("block %d row %d file byte %zu", b, r, p.file + i);
        }
    // Every byte but Q5_K's 8 x 12 packed scale bytes (192 bytes unpacked) is placed.
    ASSERT_EQ(covered + (t == TensorType::Q5_K ? 8 * 12 : 0), 8 * file_block);
  }
}

TEST_F(QuantDot, repackIsAnExactRoundTrip) {
  // Arbitrary bytes (every scale and quant bit pattern), not only quantiser output.
  const size_t expected_bytes[] = {24 * 272, 24 * 144, 3 * 1184, 3 * 1440, 3 * 1680};  // kRepackedTypes
  for (size_t it = 0; it < std::size(kRepackedTypes); ++it) {
    const TensorType t = kRepackedTypes[it];
    const int64_t n = 768;
    const size_t row_bytes = moe::gguf::rowBytes(t, n);
    std::vector<uint8_t> rows(8 * row_bytes);
    uint32_t state = 12345;
    for (auto& b : rows) b = uint8_t((state = state * 1664525u + 1013904223u) >> 24);
    const size_t group_bytes = quant::repackedGroupBytes(t, n);
    ASSERT_EQ(group_bytes, expected_bytes[it]);
    std::vector<uint8_t> group(group_bytes), back(row_bytes);
    quant::repackRows(t, rows.data(), row_bytes, n, group.data());
    for (int r = 0; r < 8; ++r) {
      quant::unpackRow(t, group.data(), n, r, back.data());
      ASSERT_TRUE(std::memcmp(back.data(), rows.data() + r * row_bytes, row_bytes) == 0)
          << moe::test::format("%s row %d", moe::gguf::tensorTypeName(t), r);
    }
  }
  for (TensorType t : kTypes) {
    bool listed = false;
    for (TensorType r : kRepackedTypes) listed = listed || r == t;
    ASSERT_EQ(quant::isRepackable(t), listed) << moe::gguf::tensorTypeName(t);
  }
  ASSERT_THROW(quant::repackedGroupBytes(TensorType::Q5_1, 256), std::invalid_argument);
  ASSERT_THROW(quant::repackedGroupBytes(TensorType::Q4_K, 100), std::invalid_argument);
}

namespace {

struct GroupCase {
  std::string name;
  TensorType type;
  int groups, nt, n;
};

std::vector<GroupCase> groupCases() {
  std::vector<GroupCase> rows;
  for (TensorType t : kRepackedTypes) {
    const char* name = moe::gguf::tensorTypeName(t);
    for (int nt : {1, 2, 3, 4, 5, 8, 9, 17})
      rows.push_back({moe::test::format("%s/1x%d", name, nt), t, 1, nt, 512});
    rows.push_back({moe::test::format("%s/3x7 wide", name), t, 3, 7, 11 * 256});
    rows.push_back({moe::test::format("%s/2x511", name), t, 2, 511, 256});
  }
  return rows;
}

void checkGroups(TensorType t, int groups, int nt, int n) {
  const int nr = 8 * groups;
  const Operands o = makeOperands(t, nr, nt, n, 3 * nr + nt);
  const size_t group_bytes = quant::repackedGroupBytes(t, n);
  std::vector<uint8_t> packed(group_bytes * groups);
  for (int g = 0; g < groups; ++g)
    quant::repackRows(t, o.rows.data() + 8 * g * o.row_bytes, o.row_bytes, n,
                      packed.data() + g * group_bytes);
  const auto expected = tile(DotIsa::Portable, t, o, nr, nt);
  for (DotIsa isa : availableIsas()) {
    std::vector<float> y(size_t(nr) * nt, NAN);
    quant::dotGroups(isa, t, packed.data(), group_bytes, groups, o.act.data(), o.act_bytes, nt, n, y.data(),
                     nr);
    for (size_t i = 0; i < y.size(); ++i)
      if (y[i] != expected[i])
        FAIL() << moe::test::format("%s: output %zu (row %zu, act %zu) %.9g != file layout %.9g",
                                    quant::dotIsaName(isa), i, i % nr, i / nr, double(y[i]),
                                    double(expected[i]));
  }
}

}  // namespace

TEST_F(QuantDot, groupsGiveTheFileLayoutsBits) {
  for (const GroupCase& c : groupCases()) {
    SCOPED_TRACE(c.name);
    checkGroups(c.type, c.groups, c.nt, c.n);
  }
}

TEST_F(QuantDot, groupsAtExtremeValues) {
  // Every quant, scale and min at its largest code, activations at +-127: the
  // group kernels' 32-bit lanes give the file layout's (exact) result.
  // Q8_0: every weight -128 (|w| = 128 read unsigned) in the first four rows and 127
  // in the others; Q6_K: every scale -128.
  for (TensorType t : kRepackedTypes) {
    const int64_t n = 512;
    const size_t row_bytes = moe::gguf::rowBytes(t, n);
    std::vector<uint8_t> rows(8 * row_bytes, 0xff);
    if (t == TensorType::Q8_0)
      for (size_t i = 0; i < rows.size(); ++i) rows[i] = i < 4 * row_bytes ? 0x80 : 0x7f;
    const size_t block = moe::gguf::rowBytes(t, moe::gguf::typeTraits(uint32_t(t))->block_elems);
    for (size_t b = 0; b < rows.size(); b += block) {
      if (t == TensorType::Q6_K) {
        std::memset(&rows[b + 192], 0x80, 16);
        rows[b + 208] = 0x00, rows[b + 209] = 0x3C;  // d = 1.0 (f16)
        continue;
      }
      rows[b] = 0x00, rows[b + 1] = 0x3C;  // d = 1.0 (f16)
      if (t == TensorType::Q4_K || t == TensorType::Q5_K) rows[b + 2] = 0x00, rows[b + 3] = 0x3C;  // dmin
    }
    std::vector<float> x(2 * n);
    for (int64_t i = 0; i < 2 * n; ++i) x[i] = i < n ? 1.0f : (i % 2 ? 1.0f : -1.0f);
    const auto format = quant::activationFormat(t);
    const size_t act_bytes = quant::activationRowBytes(format, n);
    std::vector<uint8_t> act(2 * act_bytes);
    for (int i = 0; i < 2; ++i)
      quant::quantizeActivations(format, x.data() + i * n, n, act.data() + i * act_bytes);
    std::vector<uint8_t> group(quant::repackedGroupBytes(t, n));
    quant::repackRows(t, rows.data(), row_bytes, n, group.data());
    std::vector<float> expected(16), y(16);
    quant::dotTile(DotIsa::Portable, t, rows.data(), row_bytes, 8, act.data(), act_bytes, 2, n,
                   expected.data(), 8);
    for (DotIsa isa : availableIsas()) {
      quant::dotGroups(isa, t, group.data(), group.size(), 1, act.data(), act_bytes, 2, n, y.data(), 8);
      ASSERT_TRUE(y == expected) << quant::dotIsaName(isa);
    }
    ASSERT_TRUE(std::isfinite(expected[0]) && expected[0] != 0.0f);
  }
}

TEST_F(QuantDot, backendRepacksAndKeepsTheBits) {
  // prepareWeight repacks Q8_0/Q4_0/K-quant weights of whole groups of rows; matmul and
  // embed through them give exactly what the file layout gives, on every
  // instruction set, for one token and 511.
  for (TensorType t : kTypes) {
    for (int rows : {40, 37}) {
      const int cols = 512, n_tokens = 511;
      const Operands o = makeOperands(t, rows, 0, cols, 5 + rows);
      const moe::WeightView host{t, o.rows.data(), cols, rows, o.row_bytes};
      const auto x = randomFloats(size_t(n_tokens) * cols, 11, -2.0f, 2.0f);
      for (DotIsa isa : availableIsas()) {
        moe::CpuBackend be(3);
        be.setDotIsa(isa);
        const moe::WeightView prepared = be.prepareWeight(host);
        const bool repacked = quant::isRepackable(t) && rows % 8 == 0;
        ASSERT_EQ(prepared.interleaved(), repacked);
        ASSERT_EQ(prepared.data != host.data, repacked);
        for (int n : {1, n_tokens}) {
          std::vector<float> a(size_t(n) * rows), b(size_t(n) * rows);
          be.matmul(host, x.data(), a.data(), n);
          be.matmul(prepared, x.data(), b.data(), n);
          ASSERT_TRUE(a == b) << moe::test::format("%s %d rows, %d tokens", quant::dotIsaName(isa), rows, n);
        }
        const int32_t ids[] = {0, rows - 1, 9};
        std::vector<float> e1(3 * cols), e2(3 * cols);
        be.embed(host, ids, 3, e1.data());
        be.embed(prepared, ids, 3, e2.data());
        ASSERT_TRUE(e1 == e2);
        be.releaseWeight(prepared);
        if (repacked) {
          ASSERT_THROW(be.releaseWeight(prepared), std::invalid_argument);
        }
      }
    }
  }
  moe::CpuBackend off(1);
  off.setRepackWeights(false);
  const Operands o = makeOperands(TensorType::Q4_K, 8, 0, 256, 1);
  const moe::WeightView host{TensorType::Q4_K, o.rows.data(), 256, 8, o.row_bytes};
  ASSERT_TRUE(!off.prepareWeight(host).interleaved());
  moe::CpuBackend tight(1);  // more reserve than any machine has: the file layout
  tight.setRepackReserve(uint64_t{1} << 60);
  ASSERT_TRUE(!tight.prepareWeight(host).interleaved());
  moe::CpuBackend roomy(1);
  roomy.setRepackReserve(0);
  const moe::WeightView packed = roomy.prepareWeight(host);
  ASSERT_TRUE(packed.interleaved());
  roomy.releaseWeight(packed);
}

TEST_F(QuantDot, fileLayoutBatchesRepackedOnTheFlyKeepTheBits) {
  // A weight left in the file layout meets batches of 16 or more tokens in groups
  // repacked per work item: the same bits as a backend that keeps the file layout
  // throughout, for every type, below and above the threshold, with a last row tile
  // of 8 rows (40) and one not of whole groups (37).
  for (TensorType t : kTypes) {
    for (int rows : {40, 37}) {
      const int cols = 512;
      const Operands o = makeOperands(t, rows, 0, cols, 7 + rows);
      const moe::WeightView host{t, o.rows.data(), cols, rows, o.row_bytes};
      const auto x = randomFloats(size_t(130) * cols, 13, -2.0f, 2.0f);
      for (DotIsa isa : availableIsas()) {
        moe::CpuBackend on(2), off(2);
        on.setDotIsa(isa);
        off.setDotIsa(isa);
        off.setRepackWeights(false);
        for (int n : {15, 16, 64, 130}) {
          std::vector<float> a(size_t(n) * rows, NAN), b(size_t(n) * rows, NAN);
          on.matmul(host, x.data(), a.data(), n);
          off.matmul(host, x.data(), b.data(), n);
          ASSERT_TRUE(a == b) << moe::test::format("%s %s %d rows, %d tokens", moe::gguf::tensorTypeName(t),
                                                   quant::dotIsaName(isa), rows, n);
        }
      }
    }
  }
}

TEST_F(QuantDot, slicingAnInterleavedWeight) {
  const Operands o = makeOperands(TensorType::Q4_0, 24, 0, 64, 2);
  moe::CpuBackend be(1);
  const moe::WeightView w = be.prepareWeight({TensorType::Q4_0, o.rows.data(), 64, 24, o.row_bytes});
  ASSERT_TRUE(w.interleaved());
  ASSERT_EQ(w.bytes(), size_t{3 * 2 * 144});
  const moe::WeightView s = moe::sliceRows(w, 8, 16);
  std::vector<float> a(64), b(64);
  moe::dequantizeWeightRow(s, 3, a.data());
  quant::dequantizeRow(TensorType::Q4_0, o.rows.data() + 11 * o.row_bytes, b.data(), 64);
  ASSERT_TRUE(a == b);
  ASSERT_THROW(moe::sliceRows(w, 4, 8), std::invalid_argument);
  ASSERT_THROW(moe::sliceRows(w, 8, 24), std::out_of_range);
  be.releaseWeight(w);
}

// ---- through the backend ---------------------------------------------------

TEST_F(QuantDot, backendMatmulIsTheSameOnEveryIsa) {
  // 511 tokens (odd, more than one token block) and 37 rows (not a multiple of the
  // row tile) on 3 threads: every instruction set gives the portable bits, and a
  // batch gives what one-token calls give.
  for (TensorType t : kTypes) {
    const int rows = 37, cols = 512, n_tokens = 511;
    const Operands o = makeOperands(t, rows, 0, cols, 3);
    const moe::WeightView w{t, o.rows.data(), cols, rows, o.row_bytes};
    const auto x = randomFloats(size_t(n_tokens) * cols, 9, -2.0f, 2.0f);
    std::vector<float> reference;
    for (DotIsa isa : availableIsas()) {
      moe::CpuBackend be(3);
      be.setDotIsa(isa);
      std::vector<float> y(size_t(n_tokens) * rows);
      be.matmul(w, x.data(), y.data(), n_tokens);
      if (reference.empty()) {
        reference = y;
        for (int tok : {0, 200, 510}) {
          std::vector<float> one(rows);
          be.matmul(w, x.data() + size_t(tok) * cols, one.data(), 1);
          for (int r = 0; r < rows; ++r) ASSERT_EQ(y[size_t(tok) * rows + r], one[r]);
        }
      }
      ASSERT_TRUE(y == reference) << quant::dotIsaName(isa);
    }
  }
}

// One case per SIMD instruction set the build has kernels for, each reported skipped
// (its own CTest test: quant_dot_avx2, quant_dot_avx512) on a machine without it, instead of passing
// silently: the loops above check only the sets this machine has.
namespace {
void checkIsaOrSkip(DotIsa isa) {
  if (!quant::dotIsaAvailable(isa))
    GTEST_SKIP() << quant::dotIsaName(isa)
                 << " is not available on this machine: its kernels were not checked";
  for (TensorType t : kTypes) {
    SCOPED_TRACE(moe::gguf::tensorTypeName(t));
    const Operands o = makeOperands(t, 5, 3, 512, 17);
    std::vector<float> pairs(15);
    for (int i = 0; i < 3; ++i)
      for (int r = 0; r < 5; ++r)
        pairs[size_t(i) * 5 + size_t(r)] = quant::dotQuantized(
            DotIsa::Portable, t, o.rows.data() + r * o.row_bytes, o.act.data() + i * o.act_bytes, 512);
    ASSERT_EQ(tile(isa, t, o, 5, 3), pairs);
  }
}
}  // namespace

TEST_F(QuantDot, IsaAvx2KernelsGiveThePortableBits) { checkIsaOrSkip(DotIsa::Avx2); }
TEST_F(QuantDot, IsaAvx512KernelsGiveThePortableBits) { checkIsaOrSkip(DotIsa::Avx512); }
