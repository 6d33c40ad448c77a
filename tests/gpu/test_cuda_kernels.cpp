// Every op of the CUDA backend against the CPU backend on the same seeded random
// inputs (realistic and odd shapes), then whole forward passes of the tiny
// synthetic models on CUDA vs CPU. Error = max |gpu - cpu| / max |cpu| (relMaxDiff; a NaN
// or infinity in the GPU result counts as 1e30).
// Tolerances, and why:
//   exact (0)     embed (decoding is the same float product d * q; K-quants: exact
//                 products and one rounded subtraction, as on the CPU), add, copy;
//   1e-6          rope (same host-computed cos/sin, products rounded as the CPU does),
//                 rmsNorm (double sum of squares on both), swiglu (expf differs by ulps),
//                 axpy (explicitly unfused multiply-add: normally exact);
//   1e-5          matmul (quantised types: the same 8-bit activation bytes and exact
//                 integer block sums as the CPU, float terms summed in another order;
//                 float types: the same products summed in another order; for k terms
//                 the rounding error is ~sqrt(k) * 2^-24 of the row's scale),
//                 attention (online vs two-pass softmax: rounding only; the reference
//                 attends over K and V rounded to half, as the GPU's F16 cache holds them);
//   1e-4, 1.5e-2  logits of a whole forward pass, float-typed models (every weight F32,
//                 F16 or BF16) and models with quantised weights, against a CPU backend
//                 whose KV cache is F16 as the GPU's is (setKvType). Float sums taken
//                 in another order make K and V round, now and then, to neighbouring
//                 halves; with quantised weights an activation that moves across a
//                 rounding boundary of its 8-bit quantisation moves one step (1/127 of
//                 the block's scale). Measured (stand-in): float-typed <= 2.0e-5
//                 (qwen3moe BF16), quantised <= 6.2e-3 (qwen2moe Q5_K prefill). Against
//                 the CPU's F32 cache they were 5.5e-4 and 1.3e-2.
// A wrong index, pairing, block layout or mask gives errors of order 1e-2 .. 1 in the
// ops above.
// Each case skips (moe::test::GpuTest) when the build has no CUDA or no device is
// usable. Qt-free (GoogleTest) so it builds on the GPU machine.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/cpu/cpu_backend.h"
#include "models/gguf.h"
#include "quant/quant.h"
#include "support/engine_fixture.h"
#include "support/gpu_errors.h"
#include "support/gpu_suite.h"
#include "support/test_log.h"
#include "synth/synthetic_model.h"

#if MOECHAT_HAVE_CUDA
#include "inference/cuda/cuda_backend.h"
#include "inference/cuda/cuda_check.h"
#endif
#if MOECHAT_CUDA_STANDIN
#include "cuda_standin.h"
#endif

using moe::AttentionShape;
using moe::Backend;
using moe::RopeStyle;
using moe::WeightView;
using moe::gguf::TensorType;

#if MOECHAT_HAVE_CUDA
namespace {

std::unique_ptr<Backend> gpu_, cpu_;  // made in SetUpTestSuite

using moe::test::Errors;

// A device copy of a host vector, freed with the backend.
struct DeviceFloats {
  Backend& be;
  float* p;
  size_t n;
  DeviceFloats(Backend& b, const std::vector<float>& host)
      : be(b), p(b.allocFloats(host.size())), n(host.size()) {
    be.fromHost(p, host.data(), n);
  }
  DeviceFloats(Backend& b, size_t count) : be(b), p(b.allocFloats(count)), n(count) {}
  ~DeviceFloats() {
    try {
      be.freeFloats(p);
    } catch (...) {  // after a kernel fault the sync in freeFloats throws; a throw here would terminate
    }
  }
  std::vector<float> read() const {
    std::vector<float> h(n);
    be.toHost(h.data(), p, n);
    return h;
  }
};

// A KV cache of the backend's type holding `host` (storeKv: the GPU's rounds to
// half), freed with the backend.
struct DeviceKv {
  Backend& be;
  moe::KvCache kv;
  DeviceKv(Backend& b, const std::vector<float>& host) : be(b), kv(b.allocKv(host.size())) {
    DeviceFloats staged(be, host);
    be.storeKv(kv, 0, staged.p, host.size());
  }
  explicit DeviceKv(Backend& b, size_t count) : be(b), kv(b.allocKv(count)) {}
  ~DeviceKv() {
    try {
      be.freeKv(kv);
    } catch (...) {  // as DeviceFloats
    }
  }
};

// rows x cols random values encoded as `type` (host bytes) and their device copy,
// released with the object.
struct TestWeight {
  moe::CudaBackend& gpu;
  std::vector<uint8_t> bytes;
  WeightView host, dev;
  TestWeight(Backend& be, TensorType type, int64_t rows, int64_t cols, uint32_t seed)
      : gpu(static_cast<moe::CudaBackend&>(be)) {
    const auto values = randomFloats(static_cast<size_t>(rows * cols), seed);
    const size_t rb = moe::gguf::rowBytes(type, cols);
    bytes.resize(rb * rows);
    for (int64_t r = 0; r < rows; ++r)
      moe::quant::quantizeRow(type, values.data() + r * cols, bytes.data() + r * rb, cols);
    host = WeightView{type, bytes.data(), cols, rows, rb};
    dev = gpu.prepareWeight(host);
  }
  ~TestWeight() {
    try {
      gpu.releaseWeight(dev);
    } catch (...) {  // a destructor must not throw; the backend frees it at its end anyway
    }
  }
  TestWeight(const TestWeight&) = delete;
  TestWeight& operator=(const TestWeight&) = delete;
};

const TensorType kAllTypes[] = {TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q8_0,
                                TensorType::Q4_0, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K};
// The types of K-quant mixes, gpt-oss and the low-bit grid-coded files, checked on fewer
// shapes (the stand-in's time).
const TensorType kAddedTypes[] = {
    TensorType::Q4_1,    TensorType::Q5_0,   TensorType::Q5_1,   TensorType::IQ4_NL,  TensorType::MXFP4,
    TensorType::Q2_K,    TensorType::Q3_K,   TensorType::IQ4_XS, TensorType::IQ1_S,   TensorType::IQ1_M,
    TensorType::IQ2_XXS, TensorType::IQ2_XS, TensorType::IQ2_S,  TensorType::IQ3_XXS, TensorType::IQ3_S};

int blockElems(TensorType t) { return int(moe::gguf::typeTraits(uint32_t(t))->block_elems); }
bool isBlockType(TensorType t) { return blockElems(t) == 32; }
bool isKQuant(TensorType t) { return blockElems(t) == 256; }

std::string label(TensorType t, const std::string& rest) {
  return std::string(moe::gguf::tensorTypeName(t)) + " " + rest;
}

}  // namespace

class CudaKernels : public moe::test::GpuTest {
 protected:
  static void SetUpTestSuite() {
    if (!moe::test::noCudaReason().empty()) return;
    gpu_ = std::make_unique<moe::CudaBackend>();
    // The reference: the CPU backend as it runs, whose 8-bit activations the CUDA
    // matvec quantises to the same bytes (quant/quant_dot.h).
    cpu_ = std::make_unique<moe::CpuBackend>(2);
    moe::test::info("backend: %s", gpu_->name().c_str());
  }
};

TEST_F(CudaKernels, memory) {
  DeviceFloats zeros(*gpu_, 1001);
  for (float v : zeros.read()) ASSERT_EQ(v, 0.0f);
  const auto host = randomFloats(1001, 1);
  DeviceFloats a(*gpu_, host), b(*gpu_, 1001);
  ASSERT_EQ(a.read(), host);
  gpu_->copy(b.p, a.p, 1001);
  ASSERT_EQ(b.read(), host);
  gpu_->zero(b.p + 1, 999);  // the ends stay: exactly n floats are cleared
  auto cleared = host;
  std::fill(cleared.begin() + 1, cleared.end() - 1, 0.0f);
  ASSERT_EQ(b.read(), cleared);
  ASSERT_THROW(gpu_->copy(a.p + 1, a.p, 10), std::invalid_argument);  // overlapping
  float stranger = 0.0f;
  ASSERT_THROW(gpu_->freeFloats(&stranger), std::invalid_argument);
  // Out of memory is a readable exception, and the backend stays usable.
  ASSERT_THROW(gpu_->allocFloats(size_t{1} << 48), moe::CudaOutOfMemory);
  DeviceFloats after(*gpu_, host);
  EXPECT_EQ(after.read(), host);
}

TEST_F(CudaKernels, embedAllTypes) {
  const std::vector<int32_t> tokens = {3, 0, 49, 3, 17, 48};
  Errors errors;
  for (TensorType type : kAllTypes) {
    const int64_t cols = isKQuant(type) ? 512 : isBlockType(type) ? 96 : 70;
    TestWeight table(*gpu_, type, 50, cols, 7);
    std::vector<float> want(tokens.size() * cols);
    cpu_->embed(table.host, tokens.data(), int(tokens.size()), want.data());
    DeviceFloats out(*gpu_, want.size());
    gpu_->embed(table.dev, tokens.data(), int(tokens.size()), out.p);
    const auto got = out.read();
    errors.check(got == want, relMaxDiff(got, want), label(type, "embed differs"));
    const int32_t bad = 50;
    ASSERT_THROW(gpu_->embed(table.dev, &bad, 1, out.p), std::out_of_range);
  }
  for (TensorType type : kAddedTypes) {
    const int64_t cols = isKQuant(type) ? 512 : 96;
    TestWeight table(*gpu_, type, 50, cols, 8);
    std::vector<float> want(tokens.size() * cols);
    cpu_->embed(table.host, tokens.data(), int(tokens.size()), want.data());
    DeviceFloats out(*gpu_, want.size());
    gpu_->embed(table.dev, tokens.data(), int(tokens.size()), out.p);
    const auto got = out.read();
    errors.check(got == want, relMaxDiff(got, want), label(type, "embed differs"));
  }
  errors.report();
}

TEST_F(CudaKernels, matmulAllTypes) {
  struct Shape {
    int64_t rows, cols;
  };
  Errors errors;
  for (TensorType type : kAllTypes) {
    // Odd widths for the element types; block types need whole blocks of 32, K-quants of 256.
    const std::vector<Shape> shapes = isKQuant(type) ? std::vector<Shape>{{129, 768}, {1024, 2048}, {33, 256}}
                                      : isBlockType(type)
                                          ? std::vector<Shape>{{129, 96}, {1024, 2048}, {33, 32}}
                                          : std::vector<Shape>{{67, 75}, {1024, 2048}, {1, 3}};
    for (const Shape& s : shapes)
      for (int n_tokens : {1, 2, 7, 33}) {
        // The small shapes run the same kernels, their row loops and tails included.
        if ((moe::test::gpuTestsQuick() || moe::test::testsPathsOnce()) && s.rows == 1024) continue;
        TestWeight w(*gpu_, type, s.rows, s.cols, uint32_t(s.rows + n_tokens));
        const auto x = randomFloats(size_t(n_tokens) * s.cols, 11 + n_tokens);
        std::vector<float> want(size_t(n_tokens) * s.rows);
        cpu_->matmul(w.host, x.data(), want.data(), n_tokens);
        DeviceFloats dx(*gpu_, x), dy(*gpu_, want.size());
        gpu_->matmul(w.dev, dx.p, dy.p, n_tokens);
        const double err = relMaxDiff(dy.read(), want);
        errors.check(
            err < 1e-5, err,
            label(type, moe::test::format("%lldx%lld n=%d", (long long)s.rows, (long long)s.cols, n_tokens)));
      }
  }
  // One token (matvec), 7 (matvec, a tile of 8) and 33 (the int8 GEMM where the device has it).
  for (TensorType type : kAddedTypes)
    for (int n_tokens : {1, 7, 33}) {
      const int64_t rows = 129, cols = isKQuant(type) ? 768 : 96;
      TestWeight w(*gpu_, type, rows, cols, uint32_t(rows + n_tokens));
      const auto x = randomFloats(size_t(n_tokens) * cols, 11 + n_tokens);
      std::vector<float> want(size_t(n_tokens) * rows);
      cpu_->matmul(w.host, x.data(), want.data(), n_tokens);
      DeviceFloats dx(*gpu_, x), dy(*gpu_, want.size());
      gpu_->matmul(w.dev, dx.p, dy.p, n_tokens);
      const double err = relMaxDiff(dy.read(), want);
      errors.check(
          err < 1e-5, err,
          label(type, moe::test::format("%lldx%lld n=%d", (long long)rows, (long long)cols, n_tokens)));
    }
  errors.report();
}

// matmulMany: jobs on the same x share one quantisation, and those of one type on
// the matvec share one launch (up to four): q, k and v of a decode step are 2 launches
// (1 for F16/BF16 weights, whose activations stay float).
// Each output must equal its own matmul on the CPU, whatever its group.
TEST_F(CudaKernels, matmulManyGroupsTheMatvecs) {
  Errors errors;
  for (int n_tokens : {1, 7, 33}) {
    const int64_t cols = 512;
    TestWeight a(*gpu_, TensorType::F16, 70, cols, 7), b(*gpu_, TensorType::F16, 9, cols, 8),
        q(*gpu_, TensorType::Q4_K, 96, cols, 1), k(*gpu_, TensorType::Q4_K, 33, cols, 2),
        v(*gpu_, TensorType::Q4_K, 33, cols, 3), o(*gpu_, TensorType::Q6_K, 40, cols, 4),
        e(*gpu_, TensorType::Q4_K, 7, cols, 5), f(*gpu_, TensorType::Q8_0, 64, cols, 6);
    const TestWeight* ws[] = {&a, &b, &q, &k, &v, &o, &e, &f};
    const auto x = randomFloats(size_t(n_tokens) * cols, 21 + n_tokens);
    DeviceFloats dx(*gpu_, x);
    std::vector<std::unique_ptr<DeviceFloats>> ys;
    std::vector<Backend::MatmulJob> jobs;
    for (const TestWeight* w : ws) {
      ys.push_back(std::make_unique<DeviceFloats>(*gpu_, size_t(n_tokens) * w->host.rows));
      jobs.push_back({w->dev, dx.p, ys.back()->p, n_tokens});
    }
#if MOECHAT_CUDA_STANDIN
    const auto before = cudastandin::totals().all;
#endif
    gpu_->matmulMany(jobs);
#if MOECHAT_CUDA_STANDIN
    const uint64_t launches = cudastandin::totals().all.kernel_launches - before.kernel_launches;
    moe::test::info("matmulMany of 2 F16, q, k, v (Q4_K), Q6_K, Q4_K, Q8_0 at %d tokens: %llu launches",
                    n_tokens, (unsigned long long)launches);
    // The two F16 matrices (one launch, float activations); Q8_K activations for the
    // K-quants, shared by q, k, v (one launch), Q6_K (one), the last Q4_K (one); Q8_0
    // activations and their matvec. More tokens: GEMMs and tiles.
    if (n_tokens <= 8) {
      EXPECT_EQ(launches, uint64_t{7});
    }
#endif
    for (size_t i = 0; i < jobs.size(); ++i) {
      std::vector<float> want(size_t(n_tokens) * ws[i]->host.rows);
      cpu_->matmul(ws[i]->host, x.data(), want.data(), n_tokens);
      const double err = relMaxDiff(ys[i]->read(), want);
      errors.check(err < 1e-5, err, label(ws[i]->host.type, moe::test::format("job %zu n=%d", i, n_tokens)));
    }
  }
  errors.report();
}

// 4100 rows of 4096 are more than one 16M-float dequantisation tile (the F16/BF16
// path beyond 8 tokens): the second tile's GEMM must land at rows 4096.. of every
// token's output.
TEST_F(CudaKernels, matmulTileBoundary) {
  for (TensorType type : {TensorType::F16, TensorType::BF16}) {
    if (moe::test::testsPathsOnce() && type != TensorType::F16) continue;  // one tiling path for both
    TestWeight w(*gpu_, type, 4100, 4096, 5);
    const int n_tokens = 9;
    const auto x = randomFloats(size_t(n_tokens) * 4096, 6);
    std::vector<float> want(size_t(n_tokens) * 4100);
    cpu_->matmul(w.host, x.data(), want.data(), n_tokens);
    DeviceFloats dx(*gpu_, x), dy(*gpu_, want.size());
    gpu_->matmul(w.dev, dx.p, dy.p, n_tokens);
    EXPECT_LT(relMaxDiff(dy.read(), want), 1e-5) << label(type, "tile boundary");
  }
}

// A kernel reading pageable host memory would poison the context; the backend
// refuses the weight with a message and stays usable.
TEST_F(CudaKernels, matmulRejectsPageableWeight) {
  TestWeight w(*gpu_, TensorType::F16, 8, 32, 3);
  DeviceFloats dx(*gpu_, randomFloats(32, 4)), dy(*gpu_, 8);
  ASSERT_THROW(gpu_->matmul(w.host, dx.p, dy.p, 1), std::invalid_argument);
  WeightView too_wide = w.dev;  // 33 F16 columns do not fit 64-byte rows
  too_wide.cols = 33;
  ASSERT_THROW(gpu_->matmul(too_wide, dx.p, dy.p, 1), std::invalid_argument);
  gpu_->matmul(w.dev, dx.p, dy.p, 1);
  gpu_->synchronize();
  TestWeight k(*gpu_, TensorType::Q6_K, 8, 256, 3);  // K-quant rows are whole blocks of 256
  WeightView narrow = k.dev;
  narrow.cols = 128;
  ASSERT_THROW(gpu_->matmul(narrow, dx.p, dy.p, 1), std::invalid_argument);
}

TEST_F(CudaKernels, rmsNorm) {
  const int rows = 7, dim = 4097;
  const auto x = randomFloats(size_t(rows) * dim, 21, -3.0f, 3.0f);
  const auto weight = randomFloats(dim, 22);
  DeviceFloats dw(*gpu_, weight);
  for (bool with_weight : {true, false})
    for (bool in_place : {false, true}) {
      std::vector<float> want(x.size());
      cpu_->rmsNorm(x.data(), with_weight ? weight.data() : nullptr, want.data(), rows, dim, 1e-5f);
      DeviceFloats dx(*gpu_, x), dy(*gpu_, x.size());
      float* out = in_place ? dx.p : dy.p;
      gpu_->rmsNorm(dx.p, with_weight ? dw.p : nullptr, out, rows, dim, 1e-5f);
      const double err = relMaxDiff(in_place ? dx.read() : dy.read(), want);
      EXPECT_LT(err, 1e-6) << moe::test::format("weight %d in place %d: err %g", int(with_weight),
                                                int(in_place), err);
    }
}

// The residual add and the next norm in one launch: x gets exactly x + delta (the
// same float add as the add kernel), y its norm.
TEST_F(CudaKernels, addRmsNorm) {
  const int rows = 5, dim = 2049;
  const auto x = randomFloats(size_t(rows) * dim, 31, -3.0f, 3.0f);
  const auto delta = randomFloats(size_t(rows) * dim, 32, -1.0f, 1.0f);
  const auto weight = randomFloats(dim, 33);
  std::vector<float> want_x = x, want_y(x.size());
  for (size_t i = 0; i < x.size(); ++i) want_x[i] = x[i] + delta[i];
  cpu_->rmsNorm(want_x.data(), weight.data(), want_y.data(), rows, dim, 1e-5f);
  DeviceFloats dx(*gpu_, x), dd(*gpu_, delta), dw(*gpu_, weight), dy(*gpu_, x.size());
  gpu_->addRmsNorm(dx.p, dd.p, dw.p, dy.p, rows, dim, 1e-5f);
  EXPECT_TRUE(dx.read() == want_x);
  const double err = relMaxDiff(dy.read(), want_y);
  EXPECT_LT(err, 1e-6) << moe::test::format("err %g", err);
}

TEST_F(CudaKernels, ropeBothStyles) {
  const int head_dim = 96, n_rot = 64;  // partial rotation: dims 64..95 pass through
  const std::vector<int32_t> positions = {0, 1, 7, 300, 40000};
  const std::vector<int32_t> later = {5, 6, 7, 8, 9};
  const int n = int(positions.size());
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox})
    // q (4 heads) and k (2 heads) share the cached table; then new positions replace it.
    for (auto [heads, pos] : {std::pair{4, &positions}, std::pair{2, &positions}, std::pair{3, &later}}) {
      auto x = randomFloats(size_t(n) * heads * head_dim, 31 + heads);
      DeviceFloats dx(*gpu_, x);
      cpu_->rope(x.data(), n, heads, head_dim, n_rot, pos->data(), 10000.0f, style);
      gpu_->rope(dx.p, n, heads, head_dim, n_rot, pos->data(), 10000.0f, style);
      const double err = relMaxDiff(dx.read(), x);
      EXPECT_LT(err, 1e-6) << moe::test::format("style %d heads %d: err %g", int(style), heads, err);
    }
  DeviceFloats dx(*gpu_, 96);
  ASSERT_THROW(gpu_->rope(dx.p, 1, 1, 96, 63, positions.data(), 10000.0f, RopeStyle::Norm),
               std::invalid_argument);
}

// YaRN (gpt-oss, deepseek2): the same host-computed angles as the CPU's, interpolated
// frequencies outside the band and cos/sin scaled; a second call with other
// parameters must not reuse the first one's table.
TEST_F(CudaKernels, ropeYarn) {
  const int head_dim = 64, n_rot = 64, heads = 3;
  const std::vector<int32_t> positions = {0, 1, 9, 4097, 131000};
  const int n = int(positions.size());
  moe::RopeYarn yarn;
  yarn.factor = 32.0f;
  yarn.orig_ctx = 4096;
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox})
    for (float attn_factor : {1.0f, 1.25f}) {
      yarn.attn_factor = attn_factor;
      auto x = randomFloats(size_t(n) * heads * head_dim, 41);
      DeviceFloats dx(*gpu_, x);
      const auto before = x;
      cpu_->ropeYarn(x.data(), n, heads, head_dim, n_rot, positions.data(), 150000.0f, style, yarn);
      gpu_->ropeYarn(dx.p, n, heads, head_dim, n_rot, positions.data(), 150000.0f, style, yarn);
      const double err = relMaxDiff(dx.read(), x);
      EXPECT_LT(err, 1e-6) << moe::test::format("style %d attn_factor %g: err %g", int(style), attn_factor,
                                                err);
      EXPECT_GT(relMaxDiff(x, before), 1e-2);  // it rotated
    }
  DeviceFloats dx(*gpu_, 64);
  moe::RopeYarn bad = yarn;
  bad.orig_ctx = 0;
  ASSERT_THROW(gpu_->ropeYarn(dx.p, 1, 1, 64, 64, positions.data(), 10000.0f, RopeStyle::Norm, bad),
               std::invalid_argument);
}

// q and k rotated in one launch, and k and v stored in one: the same values as the
// single calls (the same kernels' arithmetic), 2 launches where there were 4.
TEST_F(CudaKernels, ropeAndStorePairs) {
  const int head_dim = 96, n_rot = 64, n_head = 4, n_head_kv = 2;
  const std::vector<int32_t> positions = {3, 4, 5};
  const int n = int(positions.size());
  const size_t kv_elems = size_t(n) * n_head_kv * head_dim;
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox}) {
    const auto q = randomFloats(size_t(n) * n_head * head_dim, 41), k = randomFloats(kv_elems, 42),
               v = randomFloats(kv_elems, 43);
    DeviceFloats q1(*gpu_, q), k1(*gpu_, k), q2(*gpu_, q), k2(*gpu_, k), dv(*gpu_, v);
    gpu_->rope(q1.p, n, n_head, head_dim, n_rot, positions.data(), 10000.0f, style);
    gpu_->rope(k1.p, n, n_head_kv, head_dim, n_rot, positions.data(), 10000.0f, style);
    DeviceKv kc1(*gpu_, kv_elems), vc1(*gpu_, kv_elems), kc2(*gpu_, kv_elems), vc2(*gpu_, kv_elems);
    gpu_->storeKv(kc1.kv, 0, k1.p, kv_elems);
    gpu_->storeKv(vc1.kv, 0, dv.p, kv_elems);
#if MOECHAT_CUDA_STANDIN
    const auto before = cudastandin::totals().all;
#endif
    gpu_->ropePair(q2.p, n_head, k2.p, n_head_kv, n, head_dim, n_rot, positions.data(), 10000.0f, style);
    gpu_->storeKvPair(kc2.kv, vc2.kv, 0, k2.p, dv.p, kv_elems);
#if MOECHAT_CUDA_STANDIN
    EXPECT_EQ(cudastandin::totals().all.kernel_launches - before.kernel_launches, uint64_t{2});
#endif
    EXPECT_TRUE(q2.read() == q1.read());
    EXPECT_TRUE(k2.read() == k1.read());
    // The F16 caches' bytes (kv_elems halves, read back as kv_elems / 2 floats).
    for (auto [one, two] : {std::pair{&kc1, &kc2}, std::pair{&vc1, &vc2}}) {
      std::vector<float> a(kv_elems / 2), b(kv_elems / 2);
      gpu_->toHost(a.data(), static_cast<const float*>(one->kv.data), a.size());
      gpu_->toHost(b.data(), static_cast<const float*>(two->kv.data), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    }
  }
}

TEST_F(CudaKernels, attentionPrefillAndDecode) {
  struct Case {
    int n_head, n_head_kv, head_dim, pos0, n_tokens;
  };
  const int n_ctx = 80;
  const Case cases[] = {
      {8, 2, 80, 0, 37},    // prefill, GQA 4:1, head_dim not a multiple of 32
      {8, 2, 80, 50, 1},    // decode
      {8, 2, 80, 20, 9},    // a later prefill chunk
      {4, 4, 128, 0, 3},    // MHA, fewer keys than warps for the first query
      {2, 1, 256, 70, 10},  // the largest head_dim, last row of the cache
      {6, 3, 33, 11, 1},    // odd head_dim
  };
  Errors errors;
  for (const Case& c : cases) {
    const int kv_width = c.n_head_kv * c.head_dim;
    // The cache past pos0 + n_tokens holds random values too: a causal-mask bug reads them.
    const auto k = randomFloats(size_t(n_ctx) * kv_width, 41, -2.0f, 2.0f);
    const auto v = randomFloats(size_t(n_ctx) * kv_width, 42);
    const auto q = randomFloats(size_t(c.n_tokens) * c.n_head * c.head_dim, 43, -2.0f, 2.0f);
    const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(float(c.head_dim))};
    // The GPU's cache is F16: the reference attends over the same half-rounded K and V.
    auto k_half = roundedToHalf(k), v_half = roundedToHalf(v);
    std::vector<float> want(q.size());
    cpu_->attention(q.data(), hostKv(k_half), hostKv(v_half), c.pos0, c.n_tokens, shape, want.data());
    DeviceFloats dq(*gpu_, q), dout(*gpu_, q.size());
    DeviceKv dk(*gpu_, k), dv(*gpu_, v);
    gpu_->attention(dq.p, dk.kv, dv.kv, c.pos0, c.n_tokens, shape, dout.p);
    const double err = relMaxDiff(dout.read(), want);
    errors.check(err < 1e-5, err,
                 moe::test::format("heads %d/%d dim %d pos0 %d n %d", c.n_head, c.n_head_kv, c.head_dim,
                                   c.pos0, c.n_tokens));
  }
  ASSERT_NO_FATAL_FAILURE(errors.report());
  DeviceFloats d(*gpu_, 600);
  DeviceKv kv(*gpu_, 600);
  const AttentionShape too_wide{1, 1, 300, 0.1f};
  ASSERT_THROW(gpu_->attention(d.p, kv.kv, kv.kv, 0, 1, too_wide, d.p), std::invalid_argument);
}

TEST_F(CudaKernels, elementwise) {
  const size_t n = 100003;
  const auto a = randomFloats(n, 51, -6.0f, 6.0f), b = randomFloats(n, 52);
  DeviceFloats da(*gpu_, a), db(*gpu_, b), dout(*gpu_, n);

  std::vector<float> want(n);
  cpu_->swiglu(a.data(), b.data(), want.data(), n);
  gpu_->swiglu(da.p, db.p, dout.p, n);
  EXPECT_LT(relMaxDiff(dout.read(), want), 1e-6);
  // gpt-oss's clamped variant, with a limit inside the inputs' range (-6 .. 6) so
  // both clamps act.
  cpu_->swigluClamped(a.data(), b.data(), want.data(), n, 1.702f, 4.0f);
  gpu_->swigluClamped(da.p, db.p, dout.p, n, 1.702f, 4.0f);
  EXPECT_LT(relMaxDiff(dout.read(), want), 1e-6);

  auto y = a;
  cpu_->add(y.data(), b.data(), n);
  gpu_->add(da.p, db.p, n);
  ASSERT_EQ(da.read(), y);  // exact: one float add per element on both

  cpu_->axpy(y.data(), b.data(), -0.37f, n);
  gpu_->axpy(da.p, db.p, -0.37f, n);
  EXPECT_LT(relMaxDiff(da.read(), y), 1e-6);
}

// gemma4's ops: the GELU-gated product, scale, the logit soft-cap, the routing weights
// times each expert's output scale, and rope with frequency factors (its global layers:
// a quarter of the pairs turning, the rest stilled by 1e30).
TEST_F(CudaKernels, gemma4Ops) {
  const size_t n = 100003;
  const auto a = randomFloats(n, 61, -6.0f, 6.0f), b = randomFloats(n, 62);
  DeviceFloats da(*gpu_, a), db(*gpu_, b), dout(*gpu_, n);
  std::vector<float> want(n);
  cpu_->geglu(a.data(), b.data(), want.data(), n);
  gpu_->geglu(da.p, db.p, dout.p, n);
  EXPECT_LT(relMaxDiff(dout.read(), want), 1e-6);

  auto x = a;
  cpu_->scale(x.data(), 0.37f, n);
  gpu_->scale(da.p, 0.37f, n);
  ASSERT_EQ(da.read(), x);  // exact: one float product per element on both
  cpu_->softcap(x.data(), 1.5f, n);
  gpu_->softcap(da.p, 1.5f, n);
  EXPECT_LT(relMaxDiff(da.read(), x), 1e-6);

  const int tokens = 5, k = 3, n_expert = 8;
  std::vector<float> routing(2 * tokens * k);
  for (int i = 0; i < tokens * k; ++i) {
    const int32_t id = (i * 5 + 1) % n_expert;
    std::memcpy(&routing[size_t(i)], &id, sizeof id);
    routing[size_t(tokens * k + i)] = 0.1f * float(i + 1);
  }
  const auto scales = randomFloats(n_expert, 63, 0.5f, 1.5f);
  DeviceFloats droute(*gpu_, routing), dscales(*gpu_, scales);
  gpu_->scaleRoutingWeights(droute.p, tokens, k, dscales.p);
  const auto scaled = droute.read();
  for (int i = 0; i < tokens * k; ++i) {
    ASSERT_EQ(scaled[size_t(i)], routing[size_t(i)]) << "the ids stay";  // same bits
    ASSERT_EQ(scaled[size_t(tokens * k + i)],
              routing[size_t(tokens * k + i)] * scales[size_t((i * 5 + 1) % n_expert)]);
  }

  const int head_dim = 64, heads = 3;
  std::vector<float> factors(head_dim / 2, 1e30f);
  std::fill(factors.begin(), factors.begin() + head_dim / 8, 1.0f);
  const std::vector<int32_t> positions = {0, 1, 7, 300, 40000};
  const int t = int(positions.size());
  for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox}) {
    auto q = randomFloats(size_t(t) * heads * head_dim, 64);
    DeviceFloats dq(*gpu_, q);
    const auto before = q;
    cpu_->ropeFactors(q.data(), t, heads, head_dim, head_dim, positions.data(), 1e6f, style, factors.data());
    gpu_->ropeFactors(dq.p, t, heads, head_dim, head_dim, positions.data(), 1e6f, style, factors.data());
    EXPECT_LT(relMaxDiff(dq.read(), q), 1e-6);
    // The stilled pairs keep their values (neox: dims 8..31 and 40..63 of each head; at
    // position 300, token 3), the turning ones do not.
    const size_t head = size_t(3) * heads * head_dim;
    if (style == RopeStyle::Neox) {
      for (int d = head_dim / 8; d < head_dim / 2; ++d) {
        ASSERT_EQ(q[head + size_t(d)], before[head + size_t(d)]) << d;
        ASSERT_EQ(q[head + size_t(d + head_dim / 2)], before[head + size_t(d + head_dim / 2)]) << d;
      }
      EXPECT_NE(q[head + 1], before[head + 1]);
    }
  }
}

TEST_F(CudaKernels, factory) {
  std::string why = "unchanged";
  auto cpu = moe::makeBackend(moe::DeviceChoice::kCpu, 1, &why);
  EXPECT_EQ(cpu->device(), moe::Device::kCpu);
  auto cuda = moe::makeBackend(moe::DeviceChoice::kCuda, 1, &why);
  EXPECT_EQ(cuda->device(), moe::Device::kCuda);
  auto any = moe::makeBackend(moe::DeviceChoice::kAuto, 1, &why);
  EXPECT_EQ(any->device(), moe::Device::kCuda);
  ASSERT_THROW(moe::parseDeviceChoice("tpu"), std::invalid_argument);
}

// Each tiny synthetic model (every architecture, mixed weight types) runs a
// 20-token prompt and 4 decode steps on both backends; logits must agree. Then two
// K-quant models (widened to rows of 256): Q4_K experts with Q6_K matrices, Q5_K
// experts with Q4_K matrices.
constexpr double kForwardBoundFloat = 1e-4;        // every weight F32, F16 or BF16
constexpr double kForwardBoundQuantised = 1.5e-2;  // 8-bit activations (see the top)

TEST_F(CudaKernels, forwardMatchesCpu) {
  std::vector<moe::synth::SyntheticSpec> specs;
  for (const std::string& arch : moe::synth::supportedArchs()) specs.push_back(moe::synth::tinySpec(arch));
  specs.push_back(moe::synth::tinySpec("deepseek2-legacy"));  // attn_kv_b, q without q_lora, no groups
  for (auto [arch, et, wt] : {std::tuple{"llama", TensorType::Q4_K, TensorType::Q6_K},
                              std::tuple{"qwen2moe", TensorType::Q5_K, TensorType::Q4_K}}) {
    auto s = moe::synth::tinySpec(arch);
    s.expert_type = et;
    s.weight_type = wt;
    specs.push_back(moe::synth::fitToBlocks(s));
  }
  // The reference keeps its KV cache in f16 as the GPU does (the same rounding).
  moe::CpuBackend cpu_f16kv(2);
  cpu_f16kv.setKvType(moe::KvType::F16);
  Errors float_errors, quantised_errors;
  for (const auto& spec : specs) {
    if (moe::test::gpuTestsQuick() && spec.arch != "llama" && spec.arch != "gpt-oss" &&
        spec.arch != "deepseek2")
      continue;
    const std::string arch = spec.arch + " " + moe::gguf::tensorTypeName(spec.expert_type);
    const auto bytes = moe::synth::buildModel(spec).toBytes();
    auto cpu_model = moe::Model::load(moe::gguf::GgufFile::fromBytes(bytes), cpu_f16kv);
    auto gpu_model = moe::Model::load(moe::gguf::GgufFile::fromBytes(bytes), *gpu_);
    // Every routed expert uploaded once (a device-resident expert table).
    const auto table = moe::prepareExperts(*gpu_, gpu_model->hostExperts());
    moe::ResidentExpertSource cpu_experts(cpu_model->hostExperts()), gpu_experts(table);
    moe::Transformer cpu_tf(*cpu_model, cpu_f16kv, cpu_experts, 64),
        gpu_tf(*gpu_model, *gpu_, gpu_experts, 64);

    const int n_vocab = cpu_model->config().n_vocab;
    std::vector<int32_t> prompt(20);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 37 + 5) % n_vocab);
    std::vector<float> cpu_logits, gpu_logits;
    cpu_tf.forward(prompt, cpu_logits, /*all_logits=*/true);
    gpu_tf.forward(prompt, gpu_logits, /*all_logits=*/true);
    double err = relMaxDiff(gpu_logits, cpu_logits);
    auto is_float = [](TensorType t) {
      return t == TensorType::F32 || t == TensorType::F16 || t == TensorType::BF16;
    };
    const bool float_typed = is_float(spec.expert_type) && is_float(spec.weight_type);
    const double bound = float_typed ? kForwardBoundFloat : kForwardBoundQuantised;
    Errors& errors = float_typed ? float_errors : quantised_errors;
    errors.check(err < bound, err, arch + " prefill");
    for (int step = 0; step < 4; ++step) {
      const int32_t next = int32_t((step * 101 + 3) % n_vocab);
      cpu_tf.forward(std::span(&next, 1), cpu_logits);
      gpu_tf.forward(std::span(&next, 1), gpu_logits);
      err = relMaxDiff(gpu_logits, cpu_logits);
      errors.check(err < bound, err, moe::test::format("%s decode %d", arch.c_str(), step));
    }
  }
  float_errors.report();
  quantised_errors.report();
}

#else  // built without CUDA: the whole suite reports skipped

TEST(CudaKernels, skipped) {
  GTEST_SKIP() << moe::test::kNoCudaDevice << "built without CUDA (nvcc not found or MOECHAT_CUDA=OFF)";
}

#endif
