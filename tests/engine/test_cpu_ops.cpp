// Every op of the CPU backend against a naive double-precision version written
// here, on seeded random inputs, judged by normalised mean squared error
//   nmse = sum((a - b)^2) / sum(b^2)   (a: backend, b: double reference).
// Bounds: the ops compute in float, so each output carries a relative rounding
// error of roughly sqrt(terms) * 2^-24 ~ 1e-6 at worst for our sizes, i.e. an
// nmse around 1e-12; we allow 1e-10, loose enough for any summation order, tight
// enough that one wrong element, index or pairing shows (those give nmse >= 1e-4).
// Quantised weights are judged against the double product of their DEQUANTISED
// values (the quantisation error is test_quant's business). They meet activations
// quantised to 8 bits (quant/quant_dot.h), so their reference uses the
// dequantised activations too and the same 1e-10 bound holds; a second bound states
// what activation quantisation costs against the float activations (measured nmse
// 2e-5 - 1e-4 on these shapes).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "inference/backend.h"
#include "inference/cpu/cpu_backend.h"
#include "inference/cpu/thread_pool.h"
#include "models/gguf.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "support/engine_fixture.h"
#include "support/test_log.h"

using moe::AttentionShape;
using moe::RopeStyle;
using moe::WeightView;
using moe::gguf::TensorType;

namespace {

constexpr double kFloatBound = 1e-10;      // see the file comment
constexpr double kActivationBound = 5e-4;  // quantised activations vs float ones

// The values a row of activations stands for after quantisation for weight type t
// (the row itself for float weights).
std::vector<float> quantisedActivations(TensorType t, const std::vector<float>& x, int64_t cols) {
  const auto format = moe::quant::activationFormat(t);
  if (format == moe::quant::ActivationFormat::None) return x;
  std::vector<float> out(x.size());
  std::vector<uint8_t> act(moe::quant::activationRowBytes(format, cols));
  for (size_t r = 0; r < x.size() / cols; ++r) {
    moe::quant::quantizeActivations(format, x.data() + r * cols, cols, act.data());
    if (format == moe::quant::ActivationFormat::Q8_0) {  // a Q8_0 weight row's layout
      moe::quant::dequantizeRow(TensorType::Q8_0, act.data(), out.data() + r * cols, cols);
      continue;
    }
    for (int64_t b = 0; b < cols / 256; ++b) {  // Q8_K: f32 d, int8 q[256], int16 bsums[16]
      float d;
      std::memcpy(&d, act.data() + b * moe::quant::kQ8_KActBytes, 4);
      for (int j = 0; j < 256; ++j)
        out[r * cols + b * 256 + j] = d * float(int8_t(act[b * moe::quant::kQ8_KActBytes + 4 + j]));
    }
  }
  return out;
}

double nmse(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den > 0.0 ? num / den : num;
}

// A weight of `rows` x `cols` random values encoded as `type`, plus its exact
// dequantised values.
struct TestWeight {
  std::vector<uint8_t> bytes;  // [rows][row_bytes]
  std::vector<float> deq;      // [rows][cols]
  WeightView view;
};

TestWeight makeWeight(TensorType type, int64_t rows, int64_t cols, uint32_t seed) {
  TestWeight w;
  const auto values = randomFloats(static_cast<size_t>(rows * cols), seed);
  const size_t rb = moe::gguf::rowBytes(type, cols);
  w.bytes.resize(rb * rows);
  w.deq.resize(values.size());
  for (int64_t r = 0; r < rows; ++r) {
    moe::quant::quantizeRow(type, values.data() + r * cols, w.bytes.data() + r * rb, cols);
    moe::quant::dequantizeRow(type, w.bytes.data() + r * rb, w.deq.data() + r * cols, cols);
  }
  w.view = WeightView{type, w.bytes.data(), cols, rows, rb};
  return w;
}

// ---- naive double references ------------------------------------------------

std::vector<double> refMatmul(const std::vector<float>& w, const std::vector<float>& x, int64_t rows,
                              int64_t cols, int n_tokens) {  // w: [rows][cols]; x: [n_tokens][cols]
  std::vector<double> y(static_cast<size_t>(n_tokens * rows));
  for (int t = 0; t < n_tokens; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0.0;
      for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(w[r * cols + c]) * x[t * cols + c];
      y[t * rows + r] = s;
    }
  return y;
}

std::vector<double> refRmsNorm(const std::vector<float>& x, const float* weight, int n_rows, int dim,
                               float eps) {  // x: [n_rows][dim]
  std::vector<double> y(x.size());
  for (int r = 0; r < n_rows; ++r) {
    double ss = 0.0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
    const double scale = 1.0 / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i) y[r * dim + i] = x[r * dim + i] * scale * (weight ? weight[i] : 1.0);
  }
  return y;
}

std::vector<double> refRope(const std::vector<float>& x, int n_tokens, int n_heads, int head_dim, int n_rot,
                            const std::vector<int32_t>& pos, double base,
                            RopeStyle style) {  // x: [n_tokens][n_heads][head_dim]
  std::vector<double> y(x.begin(), x.end());
  for (int t = 0; t < n_tokens; ++t)
    for (int h = 0; h < n_heads; ++h) {
      double* v = y.data() + (t * n_heads + h) * head_dim;
      for (int i = 0; i < n_rot / 2; ++i) {
        const double theta = pos[t] * std::pow(base, -2.0 * i / n_rot);
        // Norm pairs (2i, 2i+1); Neox pairs (i, i + n_rot/2).
        const int a = style == RopeStyle::Norm ? 2 * i : i;
        const int b = style == RopeStyle::Norm ? 2 * i + 1 : i + n_rot / 2;
        const double x0 = v[a], x1 = v[b];
        v[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
        v[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
      }
    }
  return y;
}

std::vector<double> refAttention(const std::vector<float>& q, const std::vector<float>& k,
                                 const std::vector<float>& v, int pos0, int n_tokens,
                                 const AttentionShape& s) {
  // q: [n_tokens][n_head][hd]; k, v: [n_ctx][n_head_kv][hd]
  const int hd = s.head_dim;
  std::vector<double> out(static_cast<size_t>(n_tokens) * s.n_head * hd, 0.0);
  for (int t = 0; t < n_tokens; ++t)
    for (int h = 0; h < s.n_head; ++h) {
      const int kvh = h / (s.n_head / s.n_head_kv);
      const int n_keys = pos0 + t + 1;
      std::vector<double> p(n_keys);
      double mx = -1e300;
      for (int j = 0; j < n_keys; ++j) {
        double d = 0.0;
        for (int i = 0; i < hd; ++i)
          d += static_cast<double>(q[(t * s.n_head + h) * hd + i]) * k[(j * s.n_head_kv + kvh) * hd + i];
        p[j] = d * s.scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0.0;
      for (auto& e : p) sum += (e = std::exp(e - mx));
      for (int j = 0; j < n_keys; ++j)
        for (int i = 0; i < hd; ++i)
          out[(t * s.n_head + h) * hd + i] += p[j] / sum * v[(j * s.n_head_kv + kvh) * hd + i];
    }
  return out;
}

std::string describe(double e, double bound) { return moe::test::format("nmse %g > bound %g", e, bound); }

}  // namespace

// ---- matmul --------------------------------------------------------------

namespace {

void checkMatmul(int type, int rows, int cols, int n_tokens, int threads) {
  auto be = moe::makeCpuBackend(threads);
  const auto w = makeWeight(static_cast<TensorType>(type), rows, cols, 1000 + rows);
  const auto x = randomFloats(static_cast<size_t>(n_tokens) * cols, 2000 + cols);
  std::vector<float> y(static_cast<size_t>(n_tokens) * rows, NAN);
  be->matmul(w.view, x.data(), y.data(), n_tokens);
  const auto xq = quantisedActivations(static_cast<TensorType>(type), x, cols);
  const double e = nmse(y, refMatmul(w.deq, xq, rows, cols, n_tokens));
  ASSERT_TRUE(e <= kFloatBound) << describe(e, kFloatBound);
  const double ea = nmse(y, refMatmul(w.deq, x, rows, cols, n_tokens));
  ASSERT_TRUE(ea <= kActivationBound) << describe(ea, kActivationBound);
}

}  // namespace

TEST(CpuOps, matmul) {
  auto row = [](TensorType t, int rows, int cols, int nt, int th) {
    SCOPED_TRACE(moe::test::format("%s/%dx%d/t%d/th%d", moe::gguf::tensorTypeName(t), rows, cols, nt, th));
    checkMatmul(int(t), rows, cols, nt, th);
  };
  const TensorType all[] = {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0,
                            TensorType::Q4_0};
  for (TensorType t : all)
    for (auto [rows, cols] : {std::pair{1, 32}, {7, 64}, {33, 96}, {130, 1024}})
      for (int nt : {1, 3, 8})
        for (int th : {1, 3}) row(t, rows, cols, nt, th);
  for (TensorType t : {TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K})  // rows of whole 256s
    for (auto [rows, cols] : {std::pair{1, 256}, {7, 512}, {33, 768}, {130, 1024}})
      for (int nt : {1, 3, 8})
        for (int th : {1, 3}) row(t, rows, cols, nt, th);
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16})  // odd widths
    for (auto [rows, cols] : {std::pair{5, 7}, {13, 33}, {9, 101}})
      for (int nt : {1, 5}) row(t, rows, cols, nt, 3);
}

namespace {

void checkMatmulBatchEqualsSingleTokens(int type) {
  // Float weights: the batched path dequantises each row once and dots it as
  // F32, which quant.h documents equals dotRow on the encoded row bit for bit.
  // Quantised weights: quant_dot.h defines one summation for every tile shape.
  // Either way a prefill batch gives exactly what n_tokens one-token calls give.
  const int rows = 67, cols = 256, n_tokens = 5;
  auto be = moe::makeCpuBackend(3);
  const auto w = makeWeight(static_cast<TensorType>(type), rows, cols, 77);
  const auto x = randomFloats(static_cast<size_t>(n_tokens) * cols, 78);
  std::vector<float> batched(static_cast<size_t>(n_tokens) * rows);
  be->matmul(w.view, x.data(), batched.data(), n_tokens);
  for (int t = 0; t < n_tokens; ++t) {
    std::vector<float> single(rows);
    be->matmul(w.view, x.data() + t * cols, single.data(), 1);
    for (int r = 0; r < rows; ++r) ASSERT_EQ(batched[t * rows + r], single[r]);
  }
}

}  // namespace

TEST(CpuOps, matmulBatchEqualsSingleTokens) {
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0, TensorType::F16, TensorType::F32, TensorType::Q4_K,
                       TensorType::Q5_K, TensorType::Q6_K}) {
    SCOPED_TRACE(moe::gguf::tensorTypeName(t));
    checkMatmulBatchEqualsSingleTokens(int(t));
  }
}

TEST(CpuOps, matmulRejectsUnsupportedType) {
  auto be = moe::makeCpuBackend(1);
  std::vector<uint8_t> bytes(4 * 256 * 2);  // I32: an integer type, not computed
  const WeightView w{TensorType::I32, bytes.data(), 256, 2, 4 * 256};
  std::vector<float> x(256), y(2);
  try {
    be->matmul(w, x.data(), y.data(), 1);
    FAIL() << "matmul of I32 accepted";
  } catch (const std::invalid_argument& e) {
    ASSERT_TRUE(std::string(e.what()).find("I32") != std::string::npos) << e.what();
  }
}

// ---- embed ---------------------------------------------------------------

namespace {

void checkEmbed(int type) {
  // A lookup is exact: the output must equal the dequantised rows bit for bit.
  const int vocab = 11, dim = 512;
  auto be = moe::makeCpuBackend(2);
  const auto table = makeWeight(static_cast<TensorType>(type), vocab, dim, 5);
  const int32_t tokens[] = {0, 10, 3, 3};
  std::vector<float> out(4 * dim);
  be->embed(table.view, tokens, 4, out.data());
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < dim; ++i) ASSERT_EQ(out[t * dim + i], table.deq[tokens[t] * dim + i]);
}

}  // namespace

TEST(CpuOps, embed) {
  for (TensorType t : {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0, TensorType::Q4_0,
                       TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K}) {
    SCOPED_TRACE(moe::gguf::tensorTypeName(t));
    checkEmbed(int(t));
  }
}

TEST(CpuOps, embedOutOfRange) {
  auto be = moe::makeCpuBackend(1);
  const auto table = makeWeight(TensorType::F16, 11, 32, 5);
  std::vector<float> out(2 * 32);
  for (int32_t bad : {11, -1, 1 << 30}) {
    const int32_t tokens[] = {2, bad};
    try {
      be->embed(table.view, tokens, 2, out.data());
      FAIL() << "out-of-range token id accepted";
    } catch (const std::out_of_range& e) {
      ASSERT_TRUE(std::string(e.what()).find(std::to_string(bad)) != std::string::npos) << e.what();
    }
  }
}

// ---- rmsNorm -------------------------------------------------------------

namespace {

void checkRmsNorm(int n_rows, int dim, bool with_weight, int threads) {
  auto be = moe::makeCpuBackend(threads);
  // Offset inputs (mean far from 0) stress a naive float sum of squares.
  const auto x = randomFloats(static_cast<size_t>(n_rows) * dim, 31, 50.0f, 60.0f);
  const auto weight = randomFloats(dim, 32, 0.5f, 1.5f);
  const float* wp = with_weight ? weight.data() : nullptr;
  std::vector<float> y(x.size());
  be->rmsNorm(x.data(), wp, y.data(), n_rows, dim, 1e-6f);
  const double e = nmse(y, refRmsNorm(x, wp, n_rows, dim, 1e-6f));
  ASSERT_TRUE(e <= kFloatBound) << describe(e, kFloatBound);
}

}  // namespace

TEST(CpuOps, rmsNorm) {
  for (auto [n, d] : {std::pair{1, 64}, {5, 33}, {3, 4096}, {40, 1000}})
    for (bool w : {true, false})
      for (int th : {1, 3}) {
        SCOPED_TRACE(moe::test::format("%dx%d/w%d/th%d", n, d, int(w), th));
        checkRmsNorm(n, d, w, th);
      }
}

// ---- rope ----------------------------------------------------------------
TEST(CpuOps, ropeHandValues) {
  // head_dim 4, n_rot 4, position 1, base 10000: pair 0 turns by 1 rad, pair 1 by
  // 10000^(-2/4) = 0.01 rad. x = (1, 0, 0, 0):
  //   Norm (pairs (0,1), (2,3)):  (cos 1, sin 1, 0, 0)
  //   Neox (pairs (0,2), (1,3)):  (cos 1, 0, sin 1, 0)
  auto be = moe::makeCpuBackend(1);
  const int32_t pos[] = {1};
  float norm[4] = {1, 0, 0, 0};
  be->rope(norm, 1, 1, 4, 4, pos, 10000.0f, RopeStyle::Norm);
  ASSERT_TRUE(std::fabs(norm[0] - std::cos(1.0)) < 1e-7 && std::fabs(norm[1] - std::sin(1.0)) < 1e-7);
  ASSERT_FLOAT_EQ(norm[2], 0.0f);
  float neox[4] = {1, 0, 0, 0};
  be->rope(neox, 1, 1, 4, 4, pos, 10000.0f, RopeStyle::Neox);
  ASSERT_TRUE(std::fabs(neox[0] - std::cos(1.0)) < 1e-7 && std::fabs(neox[2] - std::sin(1.0)) < 1e-7);
  ASSERT_FLOAT_EQ(neox[1], 0.0f);
}

namespace {

void checkRope(int style, int n_tokens, int n_heads, int head_dim, int n_rot, float base, int threads) {
  auto be = moe::makeCpuBackend(threads);
  auto x = randomFloats(static_cast<size_t>(n_tokens) * n_heads * head_dim, 41);
  std::vector<int32_t> pos(n_tokens);
  std::mt19937 rng(42);
  for (auto& p : pos) p = static_cast<int32_t>(rng() % 8192);  // large angles included
  const auto ref = refRope(x, n_tokens, n_heads, head_dim, n_rot, pos, base, static_cast<RopeStyle>(style));
  const auto before = x;
  be->rope(x.data(), n_tokens, n_heads, head_dim, n_rot, pos.data(), base, static_cast<RopeStyle>(style));
  const double e = nmse(x, ref);
  ASSERT_TRUE(e <= kFloatBound) << describe(e, kFloatBound);
  // Dims past n_rot are untouched, bit for bit.
  for (int th = 0; th < n_tokens * n_heads; ++th)
    for (int i = n_rot; i < head_dim; ++i) ASSERT_EQ(x[th * head_dim + i], before[th * head_dim + i]);
}

}  // namespace

TEST(CpuOps, rope) {
  for (RopeStyle st : {RopeStyle::Norm, RopeStyle::Neox})
    for (int nt : {1, 4, 64})
      for (auto [hd, nr] : {std::pair{8, 8}, {64, 64}, {64, 32}, {12, 6}, {128, 64}})
        for (int th : {1, 3}) {
          SCOPED_TRACE(moe::test::format("%s/t%d/hd%d/rot%d/th%d", st == RopeStyle::Norm ? "norm" : "neox",
                                         nt, hd, nr, th));
          checkRope(int(st), nt, 3, hd, nr, hd == 128 ? 1e6f : 10000.0f, th);
        }
}

// ---- attention -----------------------------------------------------------
namespace {

void checkAttention(int n_head, int n_head_kv, int head_dim, int pos0, int n_tokens, int threads) {
  auto be = moe::makeCpuBackend(threads);
  const AttentionShape shape{n_head, n_head_kv, head_dim, 1.0f / std::sqrt(float(head_dim))};
  const int n_ctx = pos0 + n_tokens + 3;
  const size_t kv_size = static_cast<size_t>(n_ctx) * n_head_kv * head_dim;
  // Scores of a few units: softmax neither uniform nor one-hot.
  const auto q = randomFloats(static_cast<size_t>(n_tokens) * n_head * head_dim, 51, -2.0f, 2.0f);
  auto k = randomFloats(kv_size, 52, -2.0f, 2.0f);
  auto v = randomFloats(kv_size, 53);
  // Rows past the last query's position hold huge values: reading them (a causal
  // mask bug) would swamp the result.
  const size_t live = static_cast<size_t>(pos0 + n_tokens) * n_head_kv * head_dim;
  std::fill(k.begin() + live, k.end(), 1e3f);
  std::fill(v.begin() + live, v.end(), 1e3f);
  std::vector<float> out(q.size(), NAN);
  be->attention(q.data(), hostKv(k), hostKv(v), pos0, n_tokens, shape, out.data());
  const double e = nmse(out, refAttention(q, k, v, pos0, n_tokens, shape));
  ASSERT_TRUE(e <= kFloatBound) << describe(e, kFloatBound);
}

}  // namespace

TEST(CpuOps, attention) {
  for (auto [nh, nkv] : {std::pair{4, 4}, {4, 2}, {8, 2}})  // GQA ratios 1, 2, 4
    for (int hd : {8, 12, 64})
      for (auto [p0, nt] : {std::pair{0, 1}, {0, 4}, {5, 1}, {37, 4}, {200, 3}})
        for (int th : {1, 3}) {
          SCOPED_TRACE(moe::test::format("h%d/kv%d/hd%d/p%d/t%d/th%d", nh, nkv, hd, p0, nt, th));
          checkAttention(nh, nkv, hd, p0, nt, th);
        }
}

TEST(CpuOps, attentionRejectsBadGqa) {
  auto be = moe::makeCpuBackend(1);
  std::vector<float> buf(64);
  const AttentionShape shape{6, 4, 8, 0.3f};  // 6 % 4 != 0
  ASSERT_THROW(be->attention(buf.data(), hostKv(buf), hostKv(buf), 0, 1, shape, buf.data()),
               std::invalid_argument);
}

// The CPU backend's KV cache is F32 by default: allocKv's type, storeKv a plain copy
// within bounds; attention refuses mixed types or too few rows.
TEST(CpuOps, kvCacheIsF32) {
  auto be = moe::makeCpuBackend(1);
  const moe::KvCache kv = be->allocKv(48);
  ASSERT_TRUE(kv.type == moe::KvType::F32);
  ASSERT_EQ(kv.n_elems, size_t{48});
  const auto src = randomFloats(16, 9);
  be->storeKv(kv, 32, src.data(), src.size());
  const auto* stored = static_cast<const float*>(kv.data);
  ASSERT_TRUE(std::equal(src.begin(), src.end(), stored + 32));  // bit-exact
  ASSERT_FLOAT_EQ(stored[31], 0.0f);
  ASSERT_THROW(be->storeKv(kv, 40, src.data(), src.size()), std::out_of_range);
  std::vector<float> q(8), out(8);
  const AttentionShape shape{1, 1, 8, 0.3f};
  be->attention(q.data(), kv, kv, 5, 1, shape, out.data());  // rows 0 .. 5 of 6
  ASSERT_THROW(be->attention(q.data(), kv, kv, 6, 1, shape, out.data()), std::out_of_range);
  const moe::KvCache half{kv.data, moe::KvType::F16, 48};
  ASSERT_THROW(be->attention(q.data(), kv, half, 0, 1, shape, out.data()),
               std::invalid_argument);  // mixed types
  ASSERT_THROW(be->storeKv(half, 40, src.data(), src.size()), std::out_of_range);
  be->freeKv(kv);
}

// setKvType(F16): storeKv rounds each value to the nearest half (ties to even), and
// attention over F16 caches is, bit for bit, attention over F32 caches holding the
// rounded values (GQA, prefill and decode positions, several threads).
TEST(CpuOps, f16KvCacheIsTheRoundedF32Cache) {
  moe::CpuBackend be(3);
  be.setKvType(moe::KvType::F16);
  const AttentionShape shape{8, 2, 64, 0.125f};
  const int pos0 = 37, n_tokens = 4, n_ctx = pos0 + n_tokens;
  const size_t kv_size = size_t(n_ctx) * shape.n_head_kv * shape.head_dim;
  const moe::KvCache k = be.allocKv(kv_size), v = be.allocKv(kv_size);
  ASSERT_TRUE(k.type == moe::KvType::F16 && k.n_elems == kv_size);
  auto kf = randomFloats(kv_size, 61, -2.0f, 2.0f), vf = randomFloats(kv_size, 62);
  kf[5] = 70000.0f;  // beyond the largest half: infinity, as the GPU's cache stores it
  be.storeKv(k, 0, kf.data(), kv_size);
  be.storeKv(v, 0, vf.data(), kv_size);
  const auto* k16 = static_cast<const uint16_t*>(k.data);
  for (size_t i = 0; i < kv_size; ++i) ASSERT_EQ(k16[i], moe::quant::fp32ToFp16(kf[i]));
  kf[5] = 0.0f;  // attention below reads finite keys
  be.storeKv(k, 5, &kf[5], 1);
  auto rounded = [](std::vector<float> x) {
    for (float& e : x) e = moe::quant::fp16ToFp32(moe::quant::fp32ToFp16(e));
    return x;
  };
  auto kr = rounded(kf), vr = rounded(vf);
  const auto q = randomFloats(size_t(n_tokens) * shape.n_head * shape.head_dim, 63, -2.0f, 2.0f);
  std::vector<float> got(q.size()), want(q.size());
  be.attention(q.data(), k, v, pos0, n_tokens, shape, got.data());
  moe::CpuBackend f32(3);
  f32.attention(q.data(), hostKv(kr), hostKv(vr), pos0, n_tokens, shape, want.data());
  ASSERT_TRUE(got == want);
  be.freeKv(k);
  be.freeKv(v);
}

// ---- elementwise ---------------------------------------------------------

namespace {

void checkElementwise(int n, int threads) {
  auto be = moe::makeCpuBackend(threads);
  const auto a = randomFloats(n, 61, -8.0f, 8.0f);
  const auto b = randomFloats(n, 62, -3.0f, 3.0f);
  std::vector<double> ref(n);
  std::vector<float> out(n);

  be->swiglu(a.data(), b.data(), out.data(), n);
  for (int i = 0; i < n; ++i) ref[i] = a[i] / (1.0 + std::exp(-static_cast<double>(a[i]))) * b[i];
  double e = nmse(out, ref);
  ASSERT_TRUE(e <= kFloatBound) << "swiglu " + describe(e, kFloatBound);

  out = a;
  be->add(out.data(), b.data(), n);
  // One float addition, correctly rounded: equal to the float sum bit for bit.
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + b[i]);

  out = a;
  be->axpy(out.data(), b.data(), -0.37f, n);
  for (int i = 0; i < n; ++i) ref[i] = a[i] + -0.37 * static_cast<double>(b[i]);
  e = nmse(out, ref);
  ASSERT_TRUE(e <= kFloatBound) << "axpy " + describe(e, kFloatBound);

  std::vector<float> dst(n, 0.0f);
  be->copy(dst.data(), a.data(), n);
  ASSERT_EQ(dst, a);
  std::fill(dst.begin(), dst.end(), 0.0f);
  be->toHost(dst.data(), b.data(), n);
  ASSERT_EQ(dst, b);
  std::fill(dst.begin(), dst.end(), 0.0f);
  be->fromHost(dst.data(), a.data(), n);
  ASSERT_EQ(dst, a);
  if (n >= 2) {  // the ends stay: exactly n - 2 floats are cleared
    be->zero(dst.data() + 1, size_t(n) - 2);
    for (int i = 1; i < n - 1; ++i) ASSERT_FLOAT_EQ(dst[i], 0.0f);
    ASSERT_FLOAT_EQ(dst[0], a[0]);
    ASSERT_FLOAT_EQ(dst[n - 1], a[n - 1]);
  }
}

}  // namespace

TEST(CpuOps, elementwise) {
  for (int n : {1, 17, 1000, 300001})  // the last runs on the pool
    for (int th : {1, 3}) {
      SCOPED_TRACE(moe::test::format("n%d/th%d", n, th));
      checkElementwise(n, th);
    }
}

// ---- memory and pool -----------------------------------------------------
TEST(CpuOps, allocFloats) {
  auto be = moe::makeCpuBackend(1);
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{1} << 20}) {
    float* p = be->allocFloats(n);
    ASSERT_TRUE(p != nullptr);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 64, uintptr_t{0});
    for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(p[i], 0.0f);
    if (n) p[n - 1] = 1.0f;  // writable to the end (ASan checks)
    be->freeFloats(p);
  }
  float stranger = 0.0f;
  ASSERT_THROW(be->freeFloats(&stranger), std::invalid_argument);
  be->freeFloats(nullptr);
  be->allocFloats(10);  // left for the destructor to free (LeakSanitizer checks)
  be->synchronize();
}

TEST(CpuOps, threadPoolCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    moe::ThreadPool pool(threads);
    ASSERT_EQ(pool.threads(), threads);
    for (int64_t n : {1, 7, 1000, 100003}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallelFor(n, 3, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1);
    }
  }
}

TEST(CpuOps, threadPoolNestedAndExceptions) {
  moe::ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  pool.parallelFor(10, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallelFor(100, 1, [&](int64_t b2, int64_t e2) { total += e2 - b2; });  // runs inline
  });
  ASSERT_EQ(total.load(), int64_t{1000});
  ASSERT_THROW(pool.parallelFor(1000, 1,
                                [](int64_t b, int64_t) {
                                  if (b >= 500) throw std::runtime_error("chunk failed");
                                }),
               std::runtime_error);
  // The pool still works after a failed loop.
  std::atomic<int64_t> count{0};
  pool.parallelFor(1000, 1, [&](int64_t b, int64_t e) { count += e - b; });
  ASSERT_EQ(count.load(), int64_t{1000});
}

TEST(CpuOps, threadPoolRefusedThreadIsAnError) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizers reserve more address space than the limit below allows";
#else
  // In a child whose address space has room for about one more thread stack, a
  // pool of 64 threads must fail with an error, its started workers joined (an
  // unjoined worker aborts the process; one left waiting on a destroyed condition
  // variable hangs it, which the alarm turns into a failure).
  const pid_t child = fork();
  ASSERT_TRUE(child >= 0);
  if (child == 0) {
    alarm(60);
    long pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    const rlim_t limit = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)) + (12u << 20);
    const rlimit rl{limit, limit};
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(3);
    try {
      moe::ThreadPool pool(64);
      _exit(1);
    } catch (const std::runtime_error& e) {
      _exit(std::string(e.what()).find("cannot start 64 threads") == std::string::npos ? 2 : 0);
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child was killed (abort or hang)";
  ASSERT_EQ(WEXITSTATUS(status), 0);
#endif
}

TEST(CpuOps, defaultThreadCount) {
  // One thread per physical core: at least one, never more than the hardware threads.
  const int cores = moe::physicalCores();
  ASSERT_TRUE(cores >= 1);
  ASSERT_TRUE(cores <= int(std::max(1u, std::thread::hardware_concurrency())));
  auto be = moe::makeCpuBackend();
  ASSERT_TRUE(be->name().find(std::to_string(cores) + " threads") != std::string::npos) << be->name();
}
