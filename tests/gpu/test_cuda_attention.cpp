// The CUDA attention kernels (inference/cuda/cuda_attention.cu) against the CPU
// backend on seeded random inputs: flash-decoding (<= 4 tokens: keys split into
// chunks across blocks, one block per kv head for all the heads of its GQA group,
// then a merge of the chunks) and the tiled prefill (more tokens), over MHA and GQA
// 4:1 and 8:1, head_dim 16 .. 256 (odd ones included), contexts 1 .. 4,096.
// The GPU's KV cache is F16: K and V go in through storeKv (rounded to nearest
// even); the CPU reference gets the same K and V rounded to half on the host, in an
// F32 cache, so both sides attend over identical values.
// Error = max |gpu - cpu| / max |cpu| (relMaxDiff; NaN or infinity counts as 1e30).
// Tolerance 1e-5, and why: both sides compute the same float softmax over the same
// (half-valued) K and V; the GPU's is online (running max and sum, rescaled per key
// step, per warp and per chunk) where the CPU's is two-pass, and sums in another
// order, so they differ only by rounding: a few ulps (2^-24 ~ 6e-8) of the output's
// scale times ~sqrt(number of terms), under 1e-6 here. A wrong index, GQA mapping,
// chunk merge, causal mask or half decoding gives errors of 1e-4 (one extra key of
// 4,096) to 1: the cache rows past each query's causal range hold random values, so
// reading one of them fails. (Against the unrounded K and V the error is that of half
// rounding itself: up to 5e-4 here.)
// kvCacheIsHalf checks that the cache holds 2-byte IEEE halves, rounded to nearest
// even, bit for bit.
// Each case skips (moe::test::GpuTest) when the build has no CUDA or no device is
// usable. Qt-free (GoogleTest) so it builds on the GPU machine.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/cpu/cpu_backend.h"
#include "quant/quant.h"
#include "support/engine_fixture.h"
#include "support/gpu_errors.h"
#include "support/gpu_suite.h"
#include "support/test_log.h"

#if MOECHAT_HAVE_CUDA
#include "inference/cuda/cuda_backend.h"
#include "inference/cuda/cuda_kernels.h"
#endif
#if MOECHAT_CUDA_STANDIN
#include "cuda_standin.h"
#endif

using moe::AttentionShape;
using moe::Backend;

#if MOECHAT_HAVE_CUDA
namespace {

std::unique_ptr<Backend> gpu_, cpu_;  // made in SetUpTestSuite

using moe::test::Errors;

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

// A KV cache of the backend's type (allocKv), freed with it; `offset` elements of
// padding in front make the view start unaligned (the kernels' 2-byte-load fallback).
struct DeviceKv {
  Backend& be;
  moe::KvCache base, view;
  DeviceKv(Backend& b, size_t count, size_t offset = 0) : be(b), base(b.allocKv(count + offset)), view(base) {
    view.data = static_cast<char*>(base.data) + offset * moe::kvTypeBytes(base.type);
    view.n_elems = count;
  }
  // The cache holding `host`, stored through storeKv (rounded to the cache's type).
  DeviceKv(Backend& b, const std::vector<float>& host, size_t offset = 0) : DeviceKv(b, host.size(), offset) {
    DeviceFloats staged(be, host);
    be.storeKv(view, 0, staged.p, host.size());
  }
  ~DeviceKv() {
    try {
      be.freeKv(base);
    } catch (...) {  // as DeviceFloats
    }
  }
};

struct Case {
  int n_head, n_head_kv, head_dim, pos0, n_tokens;
  size_t misalign = 0;  // elements of offset of q, k, v and out
  bool sinks = false;   // a sink logit per head (gpt-oss)
  int window = 0;       // > 0: sliding window
};

std::string describe(const Case& c) {
  return moe::test::format("heads %d/%d dim %d pos0 %d n %d%s%s window %d", c.n_head, c.n_head_kv, c.head_dim,
                           c.pos0, c.n_tokens, c.misalign ? " misaligned" : "", c.sinks ? " sinks" : "",
                           c.window);
}

// Runs one case on both backends; the cache has 9 rows of random values past the
// last query's causal range.
double attentionError(const Case& c, uint32_t seed) {
  const int n_ctx = c.pos0 + c.n_tokens + 9;
  const int kv_width = c.n_head_kv * c.head_dim;
  const auto k = randomFloats(size_t(n_ctx) * kv_width, seed, -2.0f, 2.0f);
  const auto v = randomFloats(size_t(n_ctx) * kv_width, seed + 1);
  const auto q = randomFloats(size_t(c.n_tokens) * c.n_head * c.head_dim, seed + 2, -2.0f, 2.0f);
  AttentionShape shape{c.n_head, c.n_head_kv, c.head_dim, 1.0f / std::sqrt(float(c.head_dim))};
  shape.window = c.window;
  // Sinks from -2 to 6: from negligible to outweighing every key.
  const auto sinks = randomFloats(size_t(c.n_head), seed + 3, -2.0f, 6.0f);
  if (c.sinks) shape.sinks = sinks.data();
  // The reference attends over what the GPU's F16 cache holds.
  auto k_half = roundedToHalf(k), v_half = roundedToHalf(v);
  std::vector<float> want(q.size());
  cpu_->attention(q.data(), hostKv(k_half), hostKv(v_half), c.pos0, c.n_tokens, shape, want.data());
  DeviceFloats dq(*gpu_, q, c.misalign), dout(*gpu_, q.size(), c.misalign), dsinks(*gpu_, sinks);
  if (c.sinks) shape.sinks = dsinks.p;
  DeviceKv dk(*gpu_, k, c.misalign), dv(*gpu_, v, c.misalign);
  gpu_->attention(dq.p, dk.view, dv.view, c.pos0, c.n_tokens, shape, dout.p);
  return relMaxDiff(dout.read(), want);
}

// Under MOECHAT_GPU_TESTS_QUICK only the cases of at most quick_keys keys (enough for
// several chunks and their merge: CI's ThreadSanitizer stage; the other stages run all).
void runCases(const std::vector<Case>& cases, int quick_keys = 1100) {
  Errors errors;
  uint32_t seed = 100;
  for (const Case& c : cases) {
    if (moe::test::gpuTestsQuick() && c.pos0 + c.n_tokens > quick_keys) continue;
    const double err = attentionError(c, seed += 3);
    errors.check(err < 1e-5, err, describe(c));
  }
  errors.report();
}

}  // namespace

class CudaAttention : public moe::test::GpuTest {
 protected:
  static void SetUpTestSuite() {
    if (!moe::test::noCudaReason().empty()) return;
    gpu_ = std::make_unique<moe::CudaBackend>();
    // The reference: the CPU backend with float activations (attention never quantises,
    // but the fixture is the same as cuda_kernels').
    auto cpu = std::make_unique<moe::CpuBackend>(2);
    cpu->setQuantisedActivations(false);
    cpu_ = std::move(cpu);
    moe::test::info("backend: %s", gpu_->name().c_str());
  }
};

// The chunking the decode cases below rely on: one chunk (no partials) for a short
// context, several for a long one.
TEST_F(CudaAttention, decodeChunking) {
  EXPECT_EQ(moe::cuda::attentionScratchBytes(0, 1, 8, 2, 128), size_t{0});
  EXPECT_EQ(moe::cuda::attentionScratchBytes(30, 1, 8, 2, 128), size_t{0});
  EXPECT_GT(moe::cuda::attentionScratchBytes(999, 1, 8, 2, 128), size_t{0});
  const size_t per_chunk = 8 * (128 + 2) * sizeof(float);  // m, l and acc of each query head
  EXPECT_GE(moe::cuda::attentionScratchBytes(4095, 1, 8, 2, 128), 16 * per_chunk);
  EXPECT_EQ(moe::cuda::attentionScratchBytes(0, 37, 8, 2, 128), size_t{0});  // prefill: no partials
}

// One token at contexts 1 .. 4,096 (pos0 = context - 1): one chunk up to 64 keys, many beyond.
TEST_F(CudaAttention, decode) {
  std::vector<Case> cases;
  for (int ctx : {1, 2, 31, 1000}) {
    cases.push_back({8, 2, 128, ctx - 1, 1});  // GQA 4:1, 16-byte loads, 16 lanes a key
    cases.push_back({8, 1, 64, ctx - 1, 1});   // GQA 8:1, 8 lanes a key (four keys per warp step)
    cases.push_back({4, 4, 80, ctx - 1, 1});   // MHA, 10 of 16 lanes
    cases.push_back({8, 2, 33, ctx - 1, 1});   // odd head_dim: 2-byte loads
    cases.push_back({8, 1, 256, ctx - 1, 1});  // largest head_dim (32 lanes a key), 8:1 in one block
  }
  cases.push_back({8, 2, 128, 4095, 1});
  cases.push_back({8, 1, 64, 4095, 1});
  cases.push_back({4, 4, 80, 4095, 1});
  cases.push_back({4, 2, 33, 4095, 1});
  cases.push_back({4, 1, 256, 4095, 1});
  cases.push_back({2, 1, 16, 4095, 1});     // 2 lanes a key: 16 keys per warp step
  cases.push_back({8, 2, 128, 999, 1, 1});  // unaligned pointers: 2-byte loads
  cases.push_back({4, 1, 12, 700, 1});      // head_dim 12 (not a multiple of 8): 2-byte loads
  cases.push_back({32, 4, 128, 4095, 1});   // GQA 8:1 at head_dim 128 (as Qwen3-30B-A3B): 8 rows a block
  runCases(cases);
}

// 2 .. 4 tokens: rows of one block see different numbers of keys (the causal mask per row).
TEST_F(CudaAttention, decodeSeveralTokens) {
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
TEST_F(CudaAttention, prefill) {
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
      {8, 2, 128, 0, 5},      // the first token count past the decode path
      {8, 2, 128, 9, 37, 1},  // unaligned K/V: one half per load instead of pairs
  });
}

// gpt-oss's attention: a sink logit per head joins the softmax's denominator, and
// (every other layer) a sliding window hides the keys more than window - 1 before
// the query. Decode with one chunk and with chunks wholly before the window; prefill
// tiles that start inside the window or past it; windows of 1 (only the query's own
// key) to wider than the context.
TEST_F(CudaAttention, sinksAndWindows) {
  runCases(
      {
          {8, 2, 64, 0, 1, 0, true, 0},  // sinks alone
          {8, 2, 64, 30, 1, 0, true, 0},
          {8, 2, 64, 2000, 1, 0, true, 0},     // sinks through the chunk merge
          {8, 2, 64, 30, 1, 0, false, 16},     // window inside one chunk
          {8, 2, 64, 2000, 1, 0, false, 128},  // most chunks before the window
          {8, 2, 64, 2000, 1, 0, true, 128},   // both (as gpt-oss's windowed layers)
          {8, 2, 64, 2000, 1, 0, true, 1},     // only the query's own key
          {8, 2, 64, 100, 1, 0, true, 4000},   // window wider than the context
          {8, 1, 64, 999, 3, 0, true, 100},    // several tokens: each row its own window
          {4, 4, 33, 700, 2, 0, true, 50},     // 2-byte loads
          {8, 2, 64, 0, 37, 0, true, 0},       // prefill
          {8, 2, 64, 0, 37, 0, false, 8},
          {8, 2, 64, 100, 37, 0, true, 16},  // the block's window starts past key 0
          {8, 2, 64, 0, 256, 0, true, 128},
          {4, 1, 128, 300, 256, 0, true, 64},
          {6, 3, 33, 5, 37, 0, true, 3},
      },
      /*quick_keys=*/300);
}

// deepseek2's latent attention: one kv head of 576 dims (kv_lora 512 + 64 rope dims)
// shared by every query head (16 in DeepSeek-V2-Lite). Wide heads take their own
// kernel forms: decode with 3 vectors of 8 dims a lane and 2 rows a block, prefill
// reading q from global memory.
TEST_F(CudaAttention, wideHeads) {
  runCases(
      {
          {16, 1, 576, 0, 1},
          {16, 1, 576, 100, 1},
          {16, 1, 576, 1500, 1},  // chunks merged
          {16, 1, 576, 300, 3},
          {3, 1, 576, 40, 1},  // an odd group: the last row block half full
          {16, 1, 576, 0, 37},
          {16, 1, 576, 50, 37},
          {4, 2, 264, 20, 5},  // just past 256
      },
      /*quick_keys=*/120);
}

TEST_F(CudaAttention, rejectsBadShapes) {
  DeviceFloats d(*gpu_, 600);
  DeviceKv kv(*gpu_, 600);
  const AttentionShape too_wide{1, 1, 640, 0.1f};  // above the widest kernel, 576
  ASSERT_THROW(gpu_->attention(d.p, kv.view, kv.view, 0, 1, too_wide, d.p), std::invalid_argument);
  const AttentionShape wide_odd{1, 1, 300, 0.1f};  // above 256 only multiples of 8
  ASSERT_THROW(gpu_->attention(d.p, kv.view, kv.view, 0, 1, wide_odd, d.p), std::invalid_argument);
  const AttentionShape uneven{6, 4, 16, 0.25f};  // 6 heads do not share 4 kv heads evenly
  ASSERT_THROW(gpu_->attention(d.p, kv.view, kv.view, 0, 1, uneven, d.p), std::invalid_argument);
  // 600 elements hold 37 rows of 16: a query at position 37 needs 38.
  const AttentionShape fits{1, 1, 16, 0.25f};
  gpu_->attention(d.p, kv.view, kv.view, 36, 1, fits, d.p);
  ASSERT_THROW(gpu_->attention(d.p, kv.view, kv.view, 37, 1, fits, d.p), std::out_of_range);
  // The kernels read only F16 caches; an F32 one (device floats) is refused.
  const moe::KvCache f32{d.p, moe::KvType::F32, 600};
  ASSERT_THROW(gpu_->attention(d.p, f32, f32, 0, 1, fits, d.p), std::invalid_argument);
  ASSERT_THROW(gpu_->storeKv(f32, 0, d.p, 16), std::invalid_argument);
  ASSERT_THROW(gpu_->storeKv(kv.view, 590, d.p, 16), std::out_of_range);
}

// The cache holds 2-byte halves: allocKv's type and device bytes, and storeKv's
// bits read back raw, against the host's round-to-nearest-even conversion
// (quant::fp32ToFp16) on ties, subnormals, overflow, signed zero and random values.
TEST_F(CudaAttention, kvCacheIsHalf) {
  std::vector<float> values = {
      1.0f + 0x1p-11f,         // halfway between 1 and its successor: ties to even, 1
      1.0f + 3 * 0x1p-11f,     // halfway, ties to even: up to 1 + 2^-9
      -(1.0f + 0x1p-11f),      // the same, negative
      1.0f + 0x1.000002p-11f,  // just past halfway: up
      65504.0f,                // the largest half
      65519.0f,                // rounds down to 65504
      65520.0f,                // halfway to 65536: rounds to infinity
      -1e6f,                   // overflow: -infinity
      0x1p-24f,                // the smallest subnormal
      0x1p-25f,                // halfway to it: ties to even, 0
      0x1.8p-25f,              // past halfway: the smallest subnormal
      0x1.ffep-15f,            // past halfway from the largest subnormal: the smallest normal
      -0.0f,
      0.0f,
  };
  const auto random = randomFloats(1000, 7, -300.0f, 300.0f);
  values.insert(values.end(), random.begin(), random.end());
  if (values.size() % 2) values.push_back(0.5f);  // whole floats for the raw read-back

  const size_t first = 6, n_elems = first + values.size() + 4;  // untouched elements either side
#if MOECHAT_CUDA_STANDIN
  const uint64_t before = cudastandin::totals().bytes_allocated;
#endif
  DeviceKv kv(*gpu_, n_elems);
  ASSERT_EQ(kv.view.type, moe::KvType::F16);
  ASSERT_EQ(kv.view.n_elems, n_elems);
#if MOECHAT_CUDA_STANDIN
  EXPECT_EQ(cudastandin::totals().bytes_allocated - before, uint64_t(n_elems * 2));  // n_elems is even
#endif
  DeviceFloats src(*gpu_, values);
  gpu_->storeKv(kv.view, first, src.p, values.size());

  std::vector<uint16_t> bits(n_elems);  // the cache's bytes, read as floats' worth
  gpu_->toHost(reinterpret_cast<float*>(bits.data()), static_cast<const float*>(kv.view.data), n_elems / 2);
  std::string mismatches;
  for (size_t i = 0; i < n_elems; ++i) {
    const bool stored = i >= first && i < first + values.size();
    const uint16_t want = stored ? moe::quant::fp32ToFp16(values[i - first]) : 0;
    if (bits[i] != want)
      mismatches += moe::test::format("\n   element %zu (%a): 0x%04x, want 0x%04x", i,
                                      stored ? double(values[i - first]) : 0.0, bits[i], want);
  }
  EXPECT_TRUE(mismatches.empty()) << "stored halves differ:" << mismatches;
  EXPECT_EQ(bits[first + 0], uint16_t(0x3c00));   // 1.0: the tie went to even
  EXPECT_EQ(bits[first + 6], uint16_t(0x7c00));   // infinity
  EXPECT_EQ(bits[first + 11], uint16_t(0x0400));  // the smallest normal
}

#else  // built without CUDA: the whole suite reports skipped

TEST(CudaAttention, skipped) {
  GTEST_SKIP() << moe::test::kNoCudaDevice << "built without CUDA (nvcc not found or MOECHAT_CUDA=OFF)";
}

#endif
