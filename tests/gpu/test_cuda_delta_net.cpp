// qwen35moe's delta-net ops and gated attention on the CUDA backend against the CPU
// backend (inference/delta_net.h, the host reference), on seeded random inputs:
//   - each op alone (conv + SiLU with its carried state, the per-head L2 norm, the
//     gated RMS norm, the sigmoid output gate), at odd shapes;
//   - a delta-net layer's chain (conv, L2 norms, the delta rule, the gated norm) as a
//     prefill of several tokens then decode steps, the state carried on each backend,
//     for every register width of the delta rule's kernel (key heads of 16 .. 256);
//   - the recurrent state's lifecycle in a whole model on the GPU: a rollback
//     recomputes it, a step cancelled half-way leaves nothing behind.
// Error = max |gpu - cpu| / max |cpu| (relMaxDiff). Bounds, and why:
//   1e-6  conv, norms, gate: the CPU's products and sums in its order (expf differs by
//         ulps; the norms' double sums in another order round to the same floats);
//   1e-5  the delta rule and the chain: each state row's dot products summed by lanes
//         and a shuffle tree, and nvcc may fuse the products into FMAs;
//   1e-6  whole-model runs on the GPU against fresh runs on the GPU fed the same batches
//         (the same kernels: equal but for any nondeterminism of the device's sums).
// Each case skips (moe::test::GpuTest) when the build has no CUDA or no device is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/cpu/cpu_backend.h"
#include "support/engine_fixture.h"
#include "support/gpu_suite.h"
#include "support/test_log.h"
#include "synth/synthetic_model.h"

#if MOECHAT_HAVE_CUDA
#include "inference/cuda/cuda_backend.h"

using moe::Backend;
using moe::DeltaNetShape;

namespace {

std::unique_ptr<Backend> gpu_, cpu_;  // made in SetUpTestSuite

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
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  std::vector<float> read() const {
    std::vector<float> h(n);
    be.toHost(h.data(), p, n);
    return h;
  }
};

DeltaNetShape shapeOf(int conv_kernel, int head, int n_k_heads, int n_v_heads) {
  DeltaNetShape d;
  d.conv_kernel = conv_kernel;
  d.head_k = d.head_v = head;
  d.n_k_heads = n_k_heads;
  d.n_v_heads = n_v_heads;
  return d;
}

std::vector<int32_t> someTokens(int n, int vocab, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((7 + 13 * i + salt * 31) % vocab);
  return t;
}

std::string text(const DeltaNetShape& d) {
  return moe::test::format("kernel %d head %d heads %d/%d", d.conv_kernel, d.head_k, d.n_k_heads,
                           d.n_v_heads);
}

}  // namespace

class CudaDeltaNet : public moe::test::GpuTest {
 protected:
  static void SetUpTestSuite() {
    if (!moe::test::noCudaReason().empty()) return;
    gpu_ = std::make_unique<moe::CudaBackend>();
    cpu_ = std::make_unique<moe::CpuBackend>(2);
    moe::test::info("backend: %s", gpu_->name().c_str());
  }
  static void TearDownTestSuite() {
    gpu_.reset();
    cpu_.reset();
  }
};

TEST_F(CudaDeltaNet, convCarriesItsState) {
  // Channels past a block of threads; widths 4 (the models'), 2 and 1 (no state).
  for (auto [channels, kernel] : {std::pair{300, 4}, std::pair{33, 2}, std::pair{7, 1}}) {
    const auto w = randomFloats(size_t(channels) * kernel, 1);
    std::vector<float> cpu_state = randomFloats(std::max(kernel - 1, 1) * size_t(channels), 2);
    DeviceFloats dw(*gpu_, w), dstate(*gpu_, cpu_state);
    // A prefill shorter than the kernel, one longer, then single tokens.
    for (int n : {2, 9, 1, 1}) {
      const auto x = randomFloats(size_t(n) * channels, 3 + n, -3.0f, 3.0f);
      std::vector<float> want(x.size());
      cpu_->convSilu(x.data(), w.data(), cpu_state.data(), want.data(), n, channels, kernel);
      DeviceFloats dx(*gpu_, x), dout(*gpu_, x.size());
      gpu_->convSilu(dx.p, dw.p, dstate.p, dout.p, n, channels, kernel);
      const auto label = moe::test::format("channels %d kernel %d tokens %d", channels, kernel, n);
      EXPECT_LT(relMaxDiff(dout.read(), want), 1e-6) << label;
      EXPECT_EQ(dstate.read(), cpu_state) << label << ": the state holds the last inputs as they are";
    }
  }
}

TEST_F(CudaDeltaNet, normsAndGate) {
  // L2 norm of two heads of 48 in rows of 200 (the rest untouched), eps and scale.
  const int rows = 37, stride = 200, heads = 2, dim = 48;
  auto x = randomFloats(size_t(rows) * stride, 11, -2.0f, 2.0f);
  std::fill(x.begin() + 5 * stride, x.begin() + 5 * stride + dim, 0.0f);  // a zero head: eps divides
  DeviceFloats dx(*gpu_, x);
  cpu_->l2NormHeads(x.data() + 7, rows, stride, heads, dim, 1e-6f, 0.25f);
  gpu_->l2NormHeads(dx.p + 7, rows, stride, heads, dim, 1e-6f, 0.25f);
  EXPECT_LT(relMaxDiff(dx.read(), x), 1e-6);

  // Gated RMS norm in place and into another buffer; rows of 16, 128 and 100.
  for (int width : {16, 128, 100}) {
    const int n = 23;
    const auto in = randomFloats(size_t(n) * width, 12),
               gate = randomFloats(size_t(n) * width, 13, -4.0f, 4.0f),
               weight = randomFloats(size_t(width), 14);
    std::vector<float> want(in.size());
    cpu_->gatedRmsNorm(in.data(), weight.data(), gate.data(), want.data(), n, width, 1e-6f);
    DeviceFloats din(*gpu_, in), dgate(*gpu_, gate), dweight(*gpu_, weight), dout(*gpu_, in.size());
    gpu_->gatedRmsNorm(din.p, dweight.p, dgate.p, dout.p, n, width, 1e-6f);
    EXPECT_LT(relMaxDiff(dout.read(), want), 1e-6) << "width " << width;
    gpu_->gatedRmsNorm(din.p, dweight.p, dgate.p, din.p, n, width, 1e-6f);
    EXPECT_LT(relMaxDiff(din.read(), want), 1e-6) << "width " << width << " in place";
  }

  const size_t n = 100003;
  auto y = randomFloats(n, 15);
  const auto gate = randomFloats(n, 16, -8.0f, 8.0f);
  DeviceFloats dy(*gpu_, y), dgate(*gpu_, gate);
  cpu_->sigmoidGate(y.data(), gate.data(), n);
  gpu_->sigmoidGate(dy.p, dgate.p, n);
  EXPECT_LT(relMaxDiff(dy.read(), y), 1e-6);
}

// A delta-net layer's chain from the attn_qkv, attn_gate, ssm_alpha and ssm_beta
// products (random here) to the input of ssm_out, on one backend, its state carried.
struct Chain {
  Backend& be;
  DeltaNetShape d;
  DeviceFloats conv_w, dt_bias, a, norm, conv_state, delta_state;
  Chain(Backend& b, const DeltaNetShape& shape, const std::vector<float>& w, const std::vector<float>& dt,
        const std::vector<float>& av, const std::vector<float>& nw)
      : be(b),
        d(shape),
        conv_w(b, w),
        dt_bias(b, dt),
        a(b, av),
        norm(b, nw),
        conv_state(b, shape.convStateFloats()),
        delta_state(b, shape.deltaStateFloats()) {}
  std::vector<float> run(const std::vector<float>& qkv, const std::vector<float>& z,
                         const std::vector<float>& alpha, const std::vector<float>& beta, int n) {
    const int C = d.convChannels();
    DeviceFloats dqkv(be, qkv), dz(be, z), dalpha(be, alpha), dbeta(be, beta), x(be, qkv.size()),
        out(be, size_t(n) * d.valueWidth());
    be.convSilu(dqkv.p, conv_w.p, conv_state.p, x.p, n, C, d.conv_kernel);
    be.l2NormHeads(x.p, n, C, d.n_k_heads, d.head_k, 1e-6f, 1.0f / std::sqrt(float(d.head_k)));
    be.l2NormHeads(x.p + d.keyWidth(), n, C, d.n_k_heads, d.head_k, 1e-6f, 1.0f);
    Backend::DeltaRuleCall call;
    call.x = x.p;
    call.alpha = dalpha.p;
    call.beta = dbeta.p;
    call.dt_bias = dt_bias.p;
    call.a = a.p;
    call.state = delta_state.p;
    call.out = out.p;
    call.n_tokens = n;
    call.shape = d;
    be.deltaRule(call);
    be.gatedRmsNorm(out.p, norm.p, dz.p, out.p, n * d.n_v_heads, d.head_v, 1e-6f);
    return out.read();
  }
};

TEST_F(CudaDeltaNet, prefillThenDecodeMatchesCpu) {
  // Key heads of 16 (the tiny models'), 48 (two lanes' worth, rows not a multiple of
  // the kernel's 16 per block), 128 (Qwen3.5's) and 256 (the widest); value heads tiled
  // over the key heads.
  const DeltaNetShape shapes[] = {shapeOf(4, 16, 2, 4), shapeOf(4, 48, 1, 3), shapeOf(4, 128, 2, 4),
                                  shapeOf(3, 256, 1, 2)};
  for (const DeltaNetShape& d : shapes) {
    const int C = d.convChannels(), V = d.valueWidth(), NV = d.n_v_heads;
    auto a = randomFloats(size_t(NV), 21, 0.0f, 1.5f);
    for (float& v : a) v = -std::exp(v);  // -exp(A_log)
    const auto w = randomFloats(size_t(C) * d.conv_kernel, 22), dt = randomFloats(size_t(NV), 23),
               nw = randomFloats(size_t(d.head_v), 24, 0.5f, 1.5f);
    Chain cpu(*cpu_, d, w, dt, a, nw), gpu(*gpu_, d, w, dt, a, nw);
    int step = 0;
    for (int n : {11, 1, 1, 1, 5, 1}) {  // a prefill, decode steps, a second turn, a step
      const uint32_t seed = 100 + 10 * step++;
      const auto qkv = randomFloats(size_t(n) * C, seed, -2.0f, 2.0f),
                 z = randomFloats(size_t(n) * V, seed + 1),
                 alpha = randomFloats(size_t(n) * NV, seed + 2, -3.0f, 3.0f),
                 beta = randomFloats(size_t(n) * NV, seed + 3, -3.0f, 3.0f);
      const auto want = cpu.run(qkv, z, alpha, beta, n);
      const auto got = gpu.run(qkv, z, alpha, beta, n);
      const auto label = moe::test::format("%s: step %d (%d tokens)", text(d).c_str(), step, n);
      const double err = relMaxDiff(got, want);
      EXPECT_LT(err, 1e-5) << label;
      EXPECT_LT(relMaxDiff(gpu.delta_state.read(), cpu.delta_state.read()), 1e-5)
          << label << ": the delta state";
      EXPECT_EQ(gpu.conv_state.read(), cpu.conv_state.read()) << label << ": the conv state";
      if (step == 1) moe::test::info("%s: prefill of %d tokens, error %.2e", text(d).c_str(), n, err);
    }
  }
  const DeltaNetShape too_wide = shapeOf(4, 512, 1, 1);
  Backend::DeltaRuleCall call;
  call.n_tokens = 1;
  call.shape = too_wide;
  ASSERT_THROW(gpu_->deltaRule(call), std::invalid_argument);
}

// The recurrent state of a qwen35moe model on the GPU follows the sequence: after a
// rollback the next forward recomputes it (and decode steps replayed as graphs go on
// from it), and a step cancelled after a delta-net layer has advanced its state leaves
// nothing behind. The reference is a fresh
// sequence on the GPU fed the same batches the recomputation runs (the kept tokens,
// then the new ones), so the same kernels run and the logits must agree to rounding
// (a different split would run other matmul kernels: here ~1e-3 apart, the Q8_0
// experts' 8-bit activations moving a step).
TEST_F(CudaDeltaNet, stateLifecycleOnTheDevice) {
  const auto bytes = moe::synth::buildModel(moe::synth::tinySpec("qwen35moe")).toBytes();
  auto model = moe::Model::load(moe::gguf::GgufFile::fromBytes(bytes), *gpu_);
  const auto table = moe::prepareExperts(*gpu_, model->hostExperts());
  moe::ResidentExpertSource experts(table);
  const int nv = model->config().n_vocab;
  // The logits of every token of `then` after `first`, on a fresh sequence.
  auto fresh = [&](std::span<const int32_t> first, std::span<const int32_t> then) {
    moe::Transformer t(*model, *gpu_, experts, 64);
    std::vector<float> logits;
    t.forward(first, logits);
    t.forward(then, logits, true);
    return logits;
  };
  const auto a = someTokens(10, nv, 4), b = someTokens(4, nv, 5);
  const auto kept = std::span(a).first(6);

  moe::Transformer t(*model, *gpu_, experts, 64);
  std::vector<float> logits;
  t.forward(a, logits);
  {  // A regenerate: back to the prompt's last token, the state restored from its snapshot.
    const std::vector<float> first = logits;
    t.forward(std::span(b).first(1), logits);
    t.truncate(9);
    t.forward(std::span(a).subspan(9, 1), logits);
    EXPECT_EQ(t.recomputedTokens(), 0) << "the snapshot was not used";
    EXPECT_TRUE(logits == first) << "the restored state gave other logits";
  }
  for (int i = 0; i < 2; ++i) t.forward(std::span(b).subspan(size_t(i), 1), logits);  // decode steps
  t.truncate(6);
  t.forward(b, logits, true);
  double rollback = relMaxDiff(logits, fresh(kept, b));
  // The state was really rebuilt: carrying the 12-token state on would differ.
  EXPECT_GT(relMaxDiff(logits, fresh(a, b)), 1e-3);
  // Decode steps after it (recorded as graphs, then replayed: the state's buffers are
  // the sequence's own throughout) against a fresh sequence's.
  {
    moe::Transformer ref(*model, *gpu_, experts, 64);
    std::vector<float> ref_logits;
    ref.forward(kept, ref_logits);
    ref.forward(b, ref_logits);
    const uint64_t graphs = static_cast<moe::CudaBackend&>(*gpu_).stepGraphLaunches();
    for (int32_t next : {3, 17, 5}) {
      t.forward(std::span(&next, 1), logits);
      ref.forward(std::span(&next, 1), ref_logits);
      rollback = std::max(rollback, relMaxDiff(logits, ref_logits));
    }
    EXPECT_EQ(static_cast<moe::CudaBackend&>(*gpu_).stepGraphLaunches() - graphs, uint64_t(6))
        << "each decode step one graph";
  }
  EXPECT_LT(rollback, 1e-6) << "after a rollback";

  // Cancelled after layer 0 (a delta-net layer) has advanced its state over b.
  t.truncate(0);
  t.forward(a, logits);
  std::atomic<bool> cancel{false};
  t.setCancelFlag(&cancel);
  t.setHiddenObserver([&](const moe::HiddenEvent& e) {
    if (e.index == 1) cancel = true;
  });
  ASSERT_THROW(t.forward(b, logits), moe::Cancelled);
  ASSERT_EQ(t.nPast(), 10);
  t.setHiddenObserver(nullptr);
  cancel = false;
  t.forward(b, logits, true);
  const double cancelled = relMaxDiff(logits, fresh(a, b));
  EXPECT_LT(cancelled, 1e-6) << "after a cancelled step";
  moe::test::info("rollback %.2e, cancelled step %.2e (against fresh runs on the GPU)", rollback, cancelled);
}

#else  // built without CUDA: the whole suite reports skipped

TEST(CudaDeltaNet, skipped) {
  GTEST_SKIP() << moe::test::kNoCudaDevice << "built without CUDA (nvcc not found or MOECHAT_CUDA=OFF)";
}

#endif
