// The CUDA attention kernels (inference/cuda/cuda_attention.cu) against the CPU
// backend on seeded random inputs: flash-decoding (<= 4 tokens: keys split into
// chunks across blocks, one block per kv head for all the heads of its GQA group,
// then a merge of the chunks) and the tiled prefill (more tokens), over MHA and GQA
// 4:1 and 8:1, head_dim 16 .. 256 (odd ones included), contexts 1 .. 4,096.
// Error = max |gpu - cpu| / max |cpu| (relMaxDiff; NaN or infinity counts as 1e30).
// Tolerance 1e-5, and why: both sides compute the same float softmax; the GPU's is
// online (running max and sum, rescaled per key step, per warp and per chunk) where
// the CPU's is two-pass, and sums in another order, so they differ only by rounding:
// a few ulps (2^-24 ~ 6e-8) of the output's scale times ~sqrt(number of terms),
// under 1e-6 here. A wrong index, GQA mapping, chunk merge or causal mask gives
// errors of 1e-4 (one extra key of 4,096) to 1: the cache rows past each query's
// causal range hold random values, so reading one of them fails.
// Skipped (SKIP_SUITE) when the build has no CUDA or no device is usable. Qt-free
// (tests/gpu/gpu_check.h) so it builds on the GPU machine.

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine_fixture.h"
#include "gpu/gpu_check.h"
#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/cpu/cpu_backend.h"

#if MOECHAT_HAVE_CUDA
#include "inference/cuda/cuda_backend.h"
#include "inference/cuda/cuda_kernels.h"
#endif

using moe::AttentionShape;
using moe::Backend;

#if MOECHAT_HAVE_CUDA
namespace {

std::unique_ptr<Backend> gpu_, cpu_;  // made in initTestCase

// A case's checks reported together with the largest error (how much room the tolerance leaves).
struct Errors {
  std::string failures, worst_what;
  double worst = 0;
  void check(bool ok, double err, const std::string& what) {
    if (!ok) failures += "\n   " + what + gpu_check::format(" (err %g)", err);
    if (err > worst) worst = err, worst_what = what;
  }
  void report() const {
    INFO("largest error %g (%s)", worst, worst_what.c_str());
    CHECK_MSG(failures.empty(), "failed:" + failures);
  }
};

// Device floats, freed with the backend; `offset` floats of padding in front make the
// view start unaligned (the kernels' scalar-load fallback).
struct DeviceFloats {
  Backend& be;
  float* base;
  float* p;
  size_t n;
  DeviceFloats(Backend& b, size_t count, size_t offset = 0)
      : be(b), base(b.allocFloats(count + offset)), p(base + offset), n(count) {}
  DeviceFloats(Backend& b, const std::vector<float>& host, size_t offset = 0)
      : DeviceFloats(b, host.size(), offset) {
    be.fromHost(p, host.data(), n);
  }
  ~DeviceFloats() {
    try {
      be.freeFloats(base);
    } catch (...) {  // after a kernel fault the sync in freeFloats throws; a throw here would terminate
    }
  }
  std::vector<float> read() const {
    std::vector<float> h(n);
    be.toHost(h.data(), p, n);
    return h;
  }
};

struct Case {
  int n_head, n_head_kv, head_dim, pos0, n_tokens;
  size_t misalign = 0;  // floats of offset of q, k, v and out
};

std::string describe(const Case& c) {
  return gpu_check::format("heads %d/%d dim %d pos0 %d n %d%s", c.n_head, c.n_head_kv, c.head_dim, c.pos0,
                           c.n_tokens, c.misalign ? " misaligned" : "");
}

// Runs one case on both backends; the cache has 9 rows of random values past the
// last query's causal range.
double attentionError(const Case& c, uint32_t seed) {
  const int n_ctx = c.pos0 + c.n_tokens + 9;
  const int kv_width = c.n_head_kv * c.head_dim;
  const auto k = randomFloats(size_t(n_ctx) * kv_width, seed, -2.0f, 2.0f);
  const auto v = randomFloats(size_t(n_ctx) * kv_width, seed + 1);
  const auto q = randomFloats(size_t(c.n_tokens) * c.n_head * c.head_dim, seed + 2, -2.0f, 2.0f);
  const AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(float(c.head_dim))};
  std::vector<float> want(q.size());
  cpu_->attention(q.data(), k.data(), v.data(), c.pos0, c.n_tokens, shape, want.data());
  DeviceFloats dq(*gpu_, q, c.misalign), dk(*gpu_, k, c.misalign), dv(*gpu_, v, c.misalign),
      dout(*gpu_, q.size(), c.misalign);
  gpu_->attention(dq.p, dk.p, dv.p, c.pos0, c.n_tokens, shape, dout.p);
  return relMaxDiff(dout.read(), want);
}

void runCases(const std::vector<Case>& cases) {
  Errors errors;
  uint32_t seed = 100;
  for (const Case& c : cases) {
    const double err = attentionError(c, seed += 3);
    errors.check(err < 1e-5, err, describe(c));
  }
  errors.report();
}

}  // namespace

TEST_CASE(initTestCase) {
  std::string why;
  if (!moe::cudaDeviceAvailable(&why)) SKIP_SUITE(("no CUDA device: " + why).c_str());
  gpu_ = std::make_unique<moe::CudaBackend>();
  // The reference: the CPU backend with float activations (attention never quantises,
  // but the fixture is the same as cuda_kernels').
  auto cpu = std::make_unique<moe::CpuBackend>(2);
  cpu->setQuantisedActivations(false);
  cpu_ = std::move(cpu);
  INFO("backend: %s", gpu_->name().c_str());
}

// The chunking the decode cases below rely on: one chunk (no partials) for a short
// context, several for a long one.
TEST_CASE(decodeChunking) {
  CHECK_EQ(moe::cuda::attentionScratchBytes(0, 1, 8, 2, 128), size_t{0});
  CHECK_EQ(moe::cuda::attentionScratchBytes(30, 1, 8, 2, 128), size_t{0});
  CHECK(moe::cuda::attentionScratchBytes(999, 1, 8, 2, 128) > 0);
  const size_t per_chunk = 8 * (128 + 2) * sizeof(float);  // m, l and acc of each query head
  CHECK(moe::cuda::attentionScratchBytes(4095, 1, 8, 2, 128) >= 16 * per_chunk);
  CHECK_EQ(moe::cuda::attentionScratchBytes(0, 37, 8, 2, 128), size_t{0});  // prefill: no partials
}

// One token at contexts 1 .. 4,096 (pos0 = context - 1): one chunk up to 64 keys, many beyond.
TEST_CASE(decode) {
  std::vector<Case> cases;
  for (int ctx : {1, 2, 31, 1000}) {
    cases.push_back({8, 2, 128, ctx - 1, 1});  // GQA 4:1, float4 loads, 32 lanes a key
    cases.push_back({8, 1, 64, ctx - 1, 1});   // GQA 8:1, 16 lanes a key (two keys per warp step)
    cases.push_back({4, 4, 80, ctx - 1, 1});   // MHA, 20 of 32 lanes
    cases.push_back({8, 2, 33, ctx - 1, 1});   // odd head_dim: scalar loads
    cases.push_back({8, 1, 256, ctx - 1, 1});  // largest head_dim, 8:1 over two row blocks
  }
  cases.push_back({8, 2, 128, 4095, 1});
  cases.push_back({8, 1, 64, 4095, 1});
  cases.push_back({4, 4, 80, 4095, 1});
  cases.push_back({4, 2, 33, 4095, 1});
  cases.push_back({4, 1, 256, 4095, 1});
  cases.push_back({2, 1, 16, 4095, 1});     // 4 lanes a key: 8 keys per warp step
  cases.push_back({8, 2, 128, 999, 1, 1});  // unaligned pointers: scalar loads
  cases.push_back({4, 1, 12, 700, 1});      // head_dim 12: 4 lanes of float4
  runCases(cases);
}

// 2 .. 4 tokens: rows of one block see different numbers of keys (the causal mask per row).
TEST_CASE(decodeSeveralTokens) {
  runCases({
      {8, 2, 128, 0, 2},
      {8, 2, 128, 62, 3},  // keys 0 .. 64: the last chunk holds keys only later tokens see
      {8, 1, 64, 1000, 4},
      {4, 4, 80, 300, 4},
      {6, 3, 33, 127, 2},
      {4, 1, 256, 2000, 3},
  });
}

// Prefill: 1 (the decode path), 37 and 256 tokens, from position 0 and later.
TEST_CASE(prefill) {
  runCases({
      {8, 2, 128, 0, 1},
      {8, 2, 128, 40, 1},
      {8, 2, 128, 0, 37},  // GQA 4:1: a 32-row tile spans 8 tokens
      {8, 2, 128, 100, 37},
      {8, 1, 64, 0, 37},  // GQA 8:1
      {8, 1, 64, 77, 37},
      {4, 4, 80, 0, 37},  // MHA, head_dim not a multiple of 32
      {4, 4, 80, 31, 37},
      {6, 3, 33, 5, 37},   // odd head_dim (odd shared-memory stride)
      {4, 2, 256, 0, 37},  // largest head_dim: 16-row, 16-key tiles
      {4, 2, 256, 45, 37},
      {4, 2, 16, 3, 37},   // small head_dim
      {8, 2, 64, 0, 256},  // long prefill
      {8, 2, 64, 100, 256},
      {4, 1, 128, 0, 256},
      {2, 2, 256, 20, 256},
      {8, 2, 128, 0, 5},  // the first token count past the decode path
  });
}

TEST_CASE(rejectsBadShapes) {
  DeviceFloats d(*gpu_, 600);
  const AttentionShape too_wide{1, 1, 300, 0.1f};
  CHECK_THROWS(std::invalid_argument, gpu_->attention(d.p, d.p, d.p, 0, 1, too_wide, d.p));
  const AttentionShape uneven{6, 4, 16, 0.25f};  // 6 heads do not share 4 kv heads evenly
  CHECK_THROWS(std::invalid_argument, gpu_->attention(d.p, d.p, d.p, 0, 1, uneven, d.p));
}

#else  // built without CUDA: the whole suite reports skipped

TEST_CASE(initTestCase) {
  SKIP_SUITE("no CUDA device: built without CUDA (nvcc not found or MOECHAT_CUDA=OFF)");
}

#endif

GPU_CHECK_MAIN(TestCudaAttention)
