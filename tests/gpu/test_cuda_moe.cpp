// The device-side MoE block of the CUDA backend (routeTopK, moeExperts, moeCombine)
// against the CPU: routing must equal routeToken exactly (ids and weights); each
// slot's silu(gate x) * (up x), and the combined outputs, must match a CPU
// computation (CpuBackend matmuls with the same 8-bit activations, swiglu, weighted
// sum in rank order) to 1e-5 of their largest value (float sums in another order, as
// for matmul in cuda_kernels; see cpuLayer for why the down projection is fed the
// GPU's h); and
// splitting or reordering the experts of a call must give the same bits. On the
// stand-in, its counters show the launch and synchronisation budget of a layer:
// the same number of launches for 1 and 256 tokens and for top-1, top-2 and top-8,
// at most 8, no wait for a whole stream, one host wait (the routing read back).
// Then whole decode steps: the matmul kernels read every weight they use, at most
// 1.1x over (on the stand-in, counted by the kernels' own loads).
#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/cpu/cpu_backend.h"
#include "inference/routing.h"
#include "models/gguf.h"
#include "quant/quant.h"
#include "support/engine_fixture.h"
#include "support/gpu_suite.h"
#include "support/host_routed_source.h"
#include "support/test_log.h"
#include "synth/synthetic_model.h"

#if MOECHAT_CUDA_STANDIN
#include "cuda_standin.h"
#endif

using moe::Backend;
using moe::ExpertRef;
using moe::ExpertWeights;
using moe::WeightView;
using moe::gguf::TensorType;

namespace {

std::unique_ptr<Backend> gpu_, cpu_;  // made in CudaMoe::SetUpTestSuite

struct HostWeight {
  std::vector<uint8_t> bytes;
  WeightView host;
};

HostWeight randomWeight(TensorType type, int64_t rows, int64_t cols, uint32_t seed) {
  const auto values = randomFloats(static_cast<size_t>(rows * cols), seed);
  const size_t rb = moe::gguf::rowBytes(type, cols);
  HostWeight w;
  w.bytes.resize(rb * rows);
  for (int64_t r = 0; r < rows; ++r)
    moe::quant::quantizeRow(type, values.data() + r * cols, w.bytes.data() + r * rb, cols);
  w.host = WeightView{type, w.bytes.data(), cols, rows, rb};
  return w;
}

// A layer's routed experts on the host, and their device copies.
struct Experts {
  std::vector<HostWeight> host;  // gate, up, down per expert
  std::vector<ExpertRef> cpu, gpu;
  Experts(int n_expert, int n_embd, int n_ff, TensorType up_type, TensorType down_type) {
    for (int e = 0; e < n_expert; ++e) {
      host.push_back(randomWeight(up_type, n_ff, n_embd, 100 + 3 * e));
      host.push_back(randomWeight(up_type, n_ff, n_embd, 101 + 3 * e));
      host.push_back(randomWeight(down_type, n_embd, n_ff, 102 + 3 * e));
    }
    for (int e = 0; e < n_expert; ++e) {
      ExpertRef c;
      c.expert = e;
      c.weights = {host[3 * e].host, host[3 * e + 1].host, host[3 * e + 2].host};
      cpu.push_back(c);
      ExpertRef g = c;
      g.weights = {gpu_->prepareWeight(c.weights.gate), gpu_->prepareWeight(c.weights.up),
                   gpu_->prepareWeight(c.weights.down)};
      this->gpu.push_back(g);
    }
  }
  ~Experts() {
    for (const ExpertRef& g : gpu)
      for (const WeightView* w : {&g.weights.gate, &g.weights.up, &g.weights.down}) try {
          gpu_->releaseWeight(*w);
        } catch (...) {  // a destructor must not throw
        }
  }
};

// A device buffer freed with the object.
struct DeviceFloats {
  float* p;
  size_t n;
  explicit DeviceFloats(size_t count) : p(gpu_->allocFloats(count)), n(count) {}
  DeviceFloats(const std::vector<float>& host) : DeviceFloats(host.size()) {
    gpu_->fromHost(p, host.data(), n);
  }
  ~DeviceFloats() {
    try {
      gpu_->freeFloats(p);
    } catch (...) {
    }
  }
  std::vector<float> read() const {
    std::vector<float> h(n);
    gpu_->toHost(h.data(), p, n);
    return h;
  }
};

// The CPU reference of one layer, in two stages so that each compares like with like:
// h[slot] = silu(gate x) * (up x) of the slot's token and expert; then
// out[t] = sum_j w[t][j] * down(h_used[t * k + j]), where h_used is the GPU's own h (the
// down projection quantises h to 8 bits: an h that differs from the CPU's in the last
// bit may round to another step, 1/127 of its block's scale, which is not an error of
// the kernel under test).
struct CpuLayer {
  std::vector<float> h, out;
};
// gpt-oss: a bias row per expert on each product, and the clamped SwiGLU.
struct GptOssParts {
  std::vector<float> gate, up, down;  // [n_expert][n_ff], [n_expert][n_ff], [n_expert][n_embd]
  float alpha = 1.702f, limit = 0.0f;
};
CpuLayer cpuLayer(const Experts& ex, const std::vector<float>& x, const std::vector<int>& ids,
                  const std::vector<float>& weights, const std::vector<float>& h_used, int n_tokens, int k,
                  int n_embd, int n_ff, const GptOssParts* oss = nullptr) {
  CpuLayer r;
  r.h.assign(size_t(n_tokens) * k * n_ff, 0.0f);
  r.out.assign(size_t(n_tokens) * n_embd, 0.0f);
  std::vector<float> u(n_ff), y(n_embd);
  for (int t = 0; t < n_tokens; ++t)
    for (int j = 0; j < k; ++j) {
      const size_t slot = size_t(t) * k + j;
      const auto& w = ex.cpu[ids[slot]].weights;
      float* h = r.h.data() + slot * n_ff;
      const int e = ids[slot];
      cpu_->matmul(w.gate, x.data() + size_t(t) * n_embd, h, 1);
      cpu_->matmul(w.up, x.data() + size_t(t) * n_embd, u.data(), 1);
      if (oss) {
        cpu_->add(h, oss->gate.data() + size_t(e) * n_ff, n_ff);
        cpu_->add(u.data(), oss->up.data() + size_t(e) * n_ff, n_ff);
        cpu_->swigluClamped(h, u.data(), h, n_ff, oss->alpha, oss->limit);
      } else {
        cpu_->swiglu(h, u.data(), h, n_ff);
      }
      cpu_->matmul(w.down, h_used.data() + slot * n_ff, y.data(), 1);
      if (oss) cpu_->add(y.data(), oss->down.data() + size_t(e) * n_embd, n_embd);
      for (int c = 0; c < n_embd; ++c) r.out[size_t(t) * n_embd + c] += weights[slot] * y[c];
    }
  return r;
}

struct LayerRun {
  std::vector<int> ids;
  std::vector<float> weights, h, out;
};

// per_call for gpuLayer: every expert of the layer in one call, picked on the device
// by the device's routing (the host reads no ids).
constexpr int kEveryExpertRoutedOnDevice = 0;

// Routes `logits` on the GPU and computes the layer with the experts in `order`
// split into calls of at most `per_call`.
LayerRun gpuLayer(const Experts& ex, const std::vector<float>& x, const std::vector<float>& logits,
                  const moe::RoutingRule& rule, int n_tokens, int n_embd, int n_ff, bool reverse,
                  int per_call, const GptOssParts* oss = nullptr) {
  const int k = rule.k;
  LayerRun r;
  r.ids.resize(size_t(n_tokens) * k);
  r.weights.resize(r.ids.size());
  DeviceFloats dx(x), dlogits(logits), routing(2 * r.ids.size()), h(r.ids.size() * n_ff),
      outputs(r.ids.size() * n_embd), out(size_t(n_tokens) * n_embd);
  const bool on_device = per_call == kEveryExpertRoutedOnDevice;
  if (on_device)
    gpu_->routeTopK(dlogits.p, n_tokens, rule, routing.p, nullptr, nullptr);
  else
    gpu_->routeTopK(dlogits.p, n_tokens, rule, routing.p, r.ids.data(), r.weights.data());
  std::vector<int> needed;
  for (int e : r.ids)
    if (std::find(needed.begin(), needed.end(), e) == needed.end()) needed.push_back(e);
  std::sort(needed.begin(), needed.end());
  if (reverse) std::reverse(needed.begin(), needed.end());
  std::vector<const ExpertRef*> refs;
  for (int e : needed) refs.push_back(&ex.gpu[e]);
  Backend::MoeExpertsCall call;
  call.x = dx.p;
  call.routing = routing.p;
  call.host_ids = r.ids.data();
  call.n_tokens = n_tokens;
  call.k = k;
  call.n_embd = n_embd;
  call.n_ff = n_ff;
  call.h = h.p;
  call.outputs = outputs.p;
  std::vector<float> none(1);
  DeviceFloats gate_b(oss ? oss->gate : none), up_b(oss ? oss->up : none), down_b(oss ? oss->down : none);
  if (oss) {
    call.gate_bias = gate_b.p;
    call.up_bias = up_b.p;
    call.down_bias = down_b.p;
    call.clamped_swiglu = true;
    call.swiglu_alpha = oss->alpha;
    call.swiglu_limit = oss->limit;
  }
  std::vector<ExpertWeights> every;
  for (const ExpertRef& g : ex.gpu) every.push_back(g.weights);
  if (on_device) {
    call.host_ids = nullptr;
    call.layer_experts = every;
    call.layer = 3;
    gpu_->moeExperts(call);
  }
  for (size_t i = 0; !on_device && i < refs.size(); i += per_call) {
    call.experts =
        std::span<const ExpertRef* const>(refs).subspan(i, std::min<size_t>(per_call, refs.size() - i));
    gpu_->moeExperts(call);
  }
  gpu_->moeCombine(outputs.p, routing.p, n_tokens, k, n_embd, out.p);
  if (on_device) {  // the ids for the caller's checks, read only now
    const auto both = routing.read();
    std::memcpy(r.ids.data(), both.data(), r.ids.size() * sizeof(int));
    std::memcpy(r.weights.data(), both.data() + r.ids.size(), r.ids.size() * sizeof(float));
  }
  r.h = h.read();
  r.out = out.read();
  return r;
}

}  // namespace

class CudaMoe : public moe::test::GpuTest {
 protected:
  static void SetUpTestSuite() {
    if (!moe::test::noCudaReason().empty()) return;  // each case skips (GpuTest)
    gpu_ = moe::makeBackend(moe::DeviceChoice::kCuda, 2);
    cpu_ = std::make_unique<moe::CpuBackend>(2);
    moe::test::info("backend: %s", gpu_->name().c_str());
  }
};

TEST_F(CudaMoe, routingEqualsTheCpusExactly) {
  for (moe::GatingFunc gating : {moe::GatingFunc::Softmax, moe::GatingFunc::Sigmoid})
    for (auto [n_expert, k] : {std::pair{8, 2}, std::pair{60, 4}, std::pair{128, 8}, std::pair{512, 1}})
      for (int variant = 0; variant < 8; ++variant) {
        const bool norm = variant & 1, biased = variant & 2, grouped = variant & 4;
        const int n_tokens = 37;
        auto logits = randomFloats(size_t(n_tokens) * n_expert, uint32_t(n_expert + k), -4.0f, 4.0f);
        // Token 0's two largest logits tie (experts 5 and 6): the lower id ranks first.
        logits[5] = logits[6] = *std::max_element(logits.begin(), logits.begin() + n_expert) + 1.0f;
        // A selection bias (glm4moe's exp_probs_b) of the scores' size: it changes the choice.
        const auto bias = randomFloats(size_t(n_expert), uint32_t(3 * n_expert), -0.5f, 0.5f);
        moe::RoutingRule rule{n_expert, k, gating, norm, 2.5f};
        if (biased) rule.selection_bias = bias.data();
        if (grouped) {  // deepseek2's group-limited routing: 4 groups, the best 2 (k = 8: 3)
          rule.groups = 4;
          rule.group_used = k > 4 ? 3 : 2;
        }
        std::vector<int> ids(size_t(n_tokens) * k), want_ids(ids.size());
        std::vector<float> w(ids.size()), want_w(ids.size());
        DeviceFloats dlogits(logits), routing(2 * ids.size());
        gpu_->routeTopK(dlogits.p, n_tokens, rule, routing.p, ids.data(), w.data());
        for (int t = 0; t < n_tokens; ++t)
          moe::routeToken(&logits[size_t(t) * n_expert], rule, &want_ids[size_t(t) * k],
                          &want_w[size_t(t) * k]);
        const std::string what =
            moe::test::format("%d experts top-%d gating %d norm %d bias %d groups %d", n_expert, k,
                              int(gating), int(norm), int(biased), int(grouped));
        ASSERT_TRUE(ids == want_ids) << what + ": ids";
        ASSERT_TRUE(w == want_w) << what + ": weights";
        // The device copy holds the same ids and weights.
        const auto dev = routing.read();
        ASSERT_TRUE(std::equal(want_w.begin(), want_w.end(), dev.begin() + ids.size()))
            << what + ": device weights";
      }
}

TEST_F(CudaMoe, expertsMatchCpuInAnyOrder) {
  struct Case {
    TensorType up, down;
    int n_embd, n_ff;
    bool every_size;  // false: one matvec and one GEMM size (the stand-in's time under TSan)
  };
  const Case cases[] = {{TensorType::Q8_0, TensorType::Q8_0, 96, 160, true},
                        {TensorType::Q4_0, TensorType::Q8_0, 64, 96, true},
                        {TensorType::Q4_K, TensorType::Q6_K, 256, 256, true},
                        {TensorType::Q5_K, TensorType::Q4_K, 256, 256, true},
                        {TensorType::F16, TensorType::BF16, 70, 45, true},
                        {TensorType::MXFP4, TensorType::Q5_0, 64, 96, false},
                        {TensorType::IQ4_NL, TensorType::Q4_1, 64, 64, false},
                        {TensorType::Q3_K, TensorType::Q2_K, 256, 256, false},
                        {TensorType::IQ4_XS, TensorType::Q5_1, 256, 256, false},
                        {TensorType::IQ2_XXS, TensorType::IQ3_S, 256, 256, false}};  // IQ1_*: cuda_kernels
  for (const Case& c : cases) {
    if (moe::test::gpuTestsQuick() && &c != &cases[0] && &c != &cases[5])
      continue;  // one K-quant-free, one added type
    const int n_expert = 12;
    Experts ex(n_expert, c.n_embd, c.n_ff, c.up, c.down);
    // Up to 8 tokens the matvec form, beyond it the GEMM form (quantised types, int8
    // tensor cores): 16 tokens x top-6 over 12 experts gives some experts more than 8
    // slots (the matvec's second token tile), 80 x top-6 more than 32 (the GEMM's).
    for (auto [n_tokens, k] : {std::pair{1, 1}, std::pair{1, 4}, std::pair{8, 3}, std::pair{13, 2},
                               std::pair{16, 6}, std::pair{80, 6}}) {
      // Paths once: the matvec form and the GEMM form for every type.
      if ((!c.every_size || moe::test::testsPathsOnce()) && !(n_tokens == 8 || n_tokens == 80)) continue;
      // Quick: one matvec size per case and the 16-token form (the same threads as the rest).
      if (moe::test::gpuTestsQuick() && (n_tokens > 16 || (c.every_size && k != 4 && n_tokens != 16)))
        continue;
      const std::string what = moe::test::format("%s/%s %d tokens top-%d", moe::gguf::tensorTypeName(c.up),
                                                 moe::gguf::tensorTypeName(c.down), n_tokens, k);
      const auto x = randomFloats(size_t(n_tokens) * c.n_embd, uint32_t(n_tokens * 7 + k));
      const auto logits = randomFloats(size_t(n_tokens) * n_expert, uint32_t(n_tokens + 31 * k), -3.0f, 3.0f);
      const moe::RoutingRule rule{n_expert, k, moe::GatingFunc::Softmax, true, 1.0f};
      const LayerRun all = gpuLayer(ex, x, logits, rule, n_tokens, c.n_embd, c.n_ff, false, 64);
      const CpuLayer want = cpuLayer(ex, x, all.ids, all.weights, all.h, n_tokens, k, c.n_embd, c.n_ff);
      const double err_h = relMaxDiff(all.h, want.h), err = relMaxDiff(all.out, want.out);
      ASSERT_TRUE(err_h < 1e-5) << what + moe::test::format(": h err %g", err_h);
      ASSERT_TRUE(err < 1e-5) << what + moe::test::format(": err %g", err);
      // Paths once: the order of the experts' launches and the routing on the device
      // are the same code for every type; the first case's two forms run them.
      if (moe::test::testsPathsOnce() && &c != &cases[0]) continue;
      const LayerRun one_by_one = gpuLayer(ex, x, logits, rule, n_tokens, c.n_embd, c.n_ff, true, 1);
      const LayerRun pairs = gpuLayer(ex, x, logits, rule, n_tokens, c.n_embd, c.n_ff, true, 2);
      const LayerRun routed =
          gpuLayer(ex, x, logits, rule, n_tokens, c.n_embd, c.n_ff, false, kEveryExpertRoutedOnDevice);
      ASSERT_TRUE(one_by_one.out == all.out) << what + ": experts one by one, reversed, differ in bits";
      ASSERT_TRUE(pairs.out == all.out) << what + ": experts in pairs differ in bits";
      ASSERT_TRUE(routed.ids == all.ids) << what + ": routing on the device alone chose other experts";
      ASSERT_TRUE(routed.out == all.out) << what + ": every expert picked on the device differs in bits";
    }
  }
}

// gpt-oss's experts: each product plus its expert's bias row, the clamped SwiGLU
// (a limit the random products cross, so both clamps act), in the matvec form and
// in the GEMM form, against the CPU's matmul, add and swigluClamped; any order of
// the experts gives the same bits.
TEST_F(CudaMoe, biasedClampedExpertsMatchCpu) {
  const int n_expert = 12, n_embd = 64, n_ff = 96;
  for (auto [up, down] :
       {std::pair{TensorType::MXFP4, TensorType::MXFP4}, std::pair{TensorType::Q8_0, TensorType::F16}}) {
    if (moe::test::gpuTestsQuick() && up != TensorType::MXFP4) continue;
    Experts ex(n_expert, n_embd, n_ff, up, down);
    GptOssParts oss;
    oss.gate = randomFloats(size_t(n_expert) * n_ff, 7, -0.5f, 0.5f);
    oss.up = randomFloats(size_t(n_expert) * n_ff, 8, -0.5f, 0.5f);
    oss.down = randomFloats(size_t(n_expert) * n_embd, 9, -0.5f, 0.5f);
    oss.limit = 0.4f;
    for (auto [n_tokens, k] : {std::pair{1, 4}, std::pair{8, 3}, std::pair{80, 4}}) {
      if (moe::test::gpuTestsQuick() && n_tokens == 80) continue;  // the GEMM form: the same threads
      const std::string what = moe::test::format("%s/%s %d tokens top-%d", moe::gguf::tensorTypeName(up),
                                                 moe::gguf::tensorTypeName(down), n_tokens, k);
      const auto x = randomFloats(size_t(n_tokens) * n_embd, uint32_t(n_tokens * 5 + k));
      const auto logits = randomFloats(size_t(n_tokens) * n_expert, uint32_t(n_tokens + 17 * k), -3.0f, 3.0f);
      const moe::RoutingRule rule{n_expert, k, moe::GatingFunc::Softmax, true, 1.0f};
      const LayerRun all = gpuLayer(ex, x, logits, rule, n_tokens, n_embd, n_ff, false, 64, &oss);
      const LayerRun one_by_one = gpuLayer(ex, x, logits, rule, n_tokens, n_embd, n_ff, true, 1, &oss);
      const LayerRun routed =
          gpuLayer(ex, x, logits, rule, n_tokens, n_embd, n_ff, false, kEveryExpertRoutedOnDevice, &oss);
      ASSERT_TRUE(routed.out == all.out) << what + ": every expert picked on the device differs in bits";
      const CpuLayer want = cpuLayer(ex, x, all.ids, all.weights, all.h, n_tokens, k, n_embd, n_ff, &oss);
      const double err_h = relMaxDiff(all.h, want.h), err = relMaxDiff(all.out, want.out);
      ASSERT_TRUE(err_h < 1e-5) << what + moe::test::format(": h err %g", err_h);
      ASSERT_TRUE(err < 1e-5) << what + moe::test::format(": err %g", err);
      ASSERT_TRUE(one_by_one.out == all.out) << what + ": experts one by one, reversed, differ in bits";
      // The biases and the clamp change h.
      const LayerRun plain = gpuLayer(ex, x, logits, rule, n_tokens, n_embd, n_ff, false, 64);
      ASSERT_TRUE(relMaxDiff(plain.h, all.h) > 1e-2) << what + ": biases and clamp changed nothing";
    }
  }
}

#if MOECHAT_CUDA_STANDIN
TEST_F(CudaMoe, launchesPerLayerIndependentOfTokensAndTopK) {
  if (moe::test::gpuTestsQuick())
    GTEST_SKIP() << "quick set: launch counts (one stream) are checked in full runs";
  const int n_expert = 16, n_embd = 64, n_ff = 32;  // launch counts do not depend on sizes or types
  Experts ex(n_expert, n_embd, n_ff, TensorType::Q8_0, TensorType::Q4_0);
  uint64_t launches_first = 0;
  // The first run (the largest) grows the backend's scratch buffers (a synchronise);
  // it is not counted.
  const std::pair<int, int> runs[] = {{256, 8}, {256, 8}, {1, 8}, {1, 2}, {1, 1}, {256, 1}};
  for (size_t run = 0; run < std::size(runs); ++run) {
    const auto [n_tokens, k] = runs[run];
    const auto x = randomFloats(size_t(n_tokens) * n_embd, 5);
    const auto logits = randomFloats(size_t(n_tokens) * n_expert, 6, -3.0f, 3.0f);
    const moe::RoutingRule rule{n_expert, k, moe::GatingFunc::Softmax, false, 1.0f};
    DeviceFloats dx(x), dlogits(logits), routing(2 * size_t(n_tokens) * k), h(size_t(n_tokens) * k * n_ff),
        outputs(size_t(n_tokens) * k * n_embd), out(size_t(n_tokens) * n_embd);
    std::vector<int> ids(size_t(n_tokens) * k);
    std::vector<float> w(ids.size());
    gpu_->synchronize();
    const auto before = cudastandin::totals().all;
    gpu_->routeTopK(dlogits.p, n_tokens, rule, routing.p, ids.data(), w.data());
    std::vector<const ExpertRef*> refs;
    for (int e = 0; e < n_expert; ++e)
      if (std::find(ids.begin(), ids.end(), e) != ids.end()) refs.push_back(&ex.gpu[e]);
    Backend::MoeExpertsCall call;
    call.x = dx.p;
    call.routing = routing.p;
    call.host_ids = ids.data();
    call.n_tokens = n_tokens;
    call.k = k;
    call.n_embd = n_embd;
    call.n_ff = n_ff;
    call.experts = refs;
    call.h = h.p;
    call.outputs = outputs.p;
    gpu_->moeExperts(call);
    gpu_->moeCombine(outputs.p, routing.p, n_tokens, k, n_embd, out.p);
    const auto after = cudastandin::totals().all;

    // Every expert of the layer, picked by the device's routing: the same launches,
    // and the host waits for nothing.
    std::vector<ExpertWeights> every;
    for (const ExpertRef& g : ex.gpu) every.push_back(g.weights);
    gpu_->synchronize();
    const auto routed_before = cudastandin::totals().all;
    gpu_->routeTopK(dlogits.p, n_tokens, rule, routing.p, nullptr, nullptr);
    call.host_ids = nullptr;
    call.experts = {};
    call.layer_experts = every;
    call.layer = 0;
    gpu_->moeExperts(call);
    gpu_->moeCombine(outputs.p, routing.p, n_tokens, k, n_embd, out.p);
    const auto routed = cudastandin::totals().all;
    if (run == 0) continue;  // it uploaded the layer's expert table
    const uint64_t launches = after.kernel_launches - before.kernel_launches;
    moe::test::info("top-%d, %d tokens, %zu experts: %llu launches, %llu host waits, %llu stream waits", k,
                    n_tokens, refs.size(), (unsigned long long)launches,
                    (unsigned long long)(after.host_syncs - before.host_syncs),
                    (unsigned long long)(after.stream_syncs - before.stream_syncs));
    if (!launches_first) launches_first = launches;
    ASSERT_EQ(launches, launches_first);
    ASSERT_TRUE(launches <= 8);
    ASSERT_EQ(after.stream_syncs - before.stream_syncs, uint64_t(0));
    ASSERT_EQ(after.host_syncs - before.host_syncs, uint64_t(1));  // the routing read back
    moe::test::info("  routed on the device: %llu launches, %llu host waits, %llu stream waits",
                    (unsigned long long)(routed.kernel_launches - routed_before.kernel_launches),
                    (unsigned long long)(routed.host_syncs - routed_before.host_syncs),
                    (unsigned long long)(routed.stream_syncs - routed_before.stream_syncs));
    ASSERT_EQ(routed.kernel_launches - routed_before.kernel_launches, launches_first);
    ASSERT_EQ(routed.host_syncs - routed_before.host_syncs, uint64_t(0));
    ASSERT_EQ(routed.stream_syncs - routed_before.stream_syncs, uint64_t(0));
  }
}
#endif

using moe::test::HostRoutedSource;

#if MOECHAT_CUDA_STANDIN
// Every weight resident: a decode step routes and picks its experts on the device,
// is recorded once and replayed as one graph (no kernel launched one by one, none
// recorded again: the token and position are read on the device), and the host waits
// once per token, for the logits, never for a whole stream; the logits are those of
// the host-routed path (launched op by op), bit for bit.
TEST_F(CudaMoe, residentDecodeIsOneGraphAndOneWait) {
  for (const char* arch : {"qwen3moe", "gpt-oss", "deepseek2", "qwen35moe", "minimax-m2"}) {
    if (moe::test::gpuTestsQuick() && std::string(arch) != "qwen3moe") continue;  // the same graph threads
    auto spec = moe::synth::tinySpec(arch);
    const auto bytes = moe::synth::buildModel(spec).toBytes();
    auto model = moe::Model::load(moe::gguf::GgufFile::fromBytes(bytes), *gpu_);
    const auto table = moe::prepareExperts(*gpu_, model->hostExperts());
    moe::ResidentExpertSource resident(table);
    HostRoutedSource host_routed(resident);
    moe::Transformer on_device(*model, *gpu_, resident, 64), on_host(*model, *gpu_, host_routed, 64);
    std::vector<float> logits_device, logits_host;
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7};
    on_device.forward(prompt, logits_device);
    on_host.forward(prompt, logits_host);
    ASSERT_TRUE(logits_device == logits_host) << arch << ": the prompt's logits differ";
    for (int32_t next : {9, 4, 11}) {
      const bool first_step = next == 9;
      gpu_->synchronize();
      const auto before = cudastandin::totals().all;
      on_device.forward(std::span(&next, 1), logits_device);
      const auto after = cudastandin::totals().all;
      on_host.forward(std::span(&next, 1), logits_host);
      const auto host_after = cudastandin::totals().all;
      moe::test::info(
          "%s decode step: %llu graph launches (%llu kernels recorded), %llu kernel launches, %llu "
          "host waits, %llu stream waits (host-routed: %llu kernel launches, %llu host waits)",
          arch, (unsigned long long)(after.graph_launches - before.graph_launches),
          (unsigned long long)(after.captured_kernels - before.captured_kernels),
          (unsigned long long)(after.kernel_launches - before.kernel_launches),
          (unsigned long long)(after.host_syncs - before.host_syncs),
          (unsigned long long)(after.stream_syncs - before.stream_syncs),
          (unsigned long long)(host_after.kernel_launches - after.kernel_launches),
          (unsigned long long)(host_after.host_syncs - after.host_syncs));
      ASSERT_EQ(after.graph_launches - before.graph_launches, uint64_t(1))
          << arch << ": the step is not one graph";
      // With recurrent layers the prompt's last token ran as a step of its own (the
      // state's snapshot comes before it), recorded then and replayed here.
      if (first_step && !model->config().hasRecurrentLayers())
        ASSERT_TRUE(after.captured_kernels > before.captured_kernels) << arch << ": nothing recorded";
      else
        ASSERT_EQ(after.captured_kernels, before.captured_kernels) << arch << ": the step was recorded again";
      ASSERT_EQ(after.kernel_launches - before.kernel_launches, uint64_t(0))
          << arch << ": kernels launched one by one";
      ASSERT_EQ(host_after.graph_launches - after.graph_launches, uint64_t(0))
          << arch << ": host-routed as a graph";
      ASSERT_EQ(after.host_syncs - before.host_syncs, uint64_t(1)) << arch << ": waits besides the logits";
      ASSERT_EQ(after.stream_syncs - before.stream_syncs, uint64_t(0)) << arch;
      ASSERT_EQ(after.bytes_d2h - before.bytes_d2h, uint64_t(model->config().n_vocab) * sizeof(float))
          << arch;
      ASSERT_TRUE(logits_device == logits_host) << arch << ": decode logits differ at token " << next;
    }
  }
}
#endif

#if MOECHAT_CUDA_STANDIN
// A cache's source (allReady false): the experts it says were ready at acquire are
// computed in one call per run of them (the launches of a source that has them all
// ready), each other one alone, right after its wait; the logits are the same bits.
class CacheLikeSource final : public moe::ExpertSource {
 public:
  CacheLikeSource(moe::ExpertSource& inner, bool ready) : inner_(inner), ready_(ready) {}
  std::vector<ExpertRef> acquire(int layer, std::span<const int> experts) override {
    std::vector<ExpertRef> refs = inner_.acquire(layer, experts);
    for (ExpertRef& r : refs) r.ready = ready_;
    return refs;
  }
  void release(int layer) override { inner_.release(layer); }
  bool wantsLayerInput() const override { return false; }

 private:
  moe::ExpertSource& inner_;
  bool ready_;
};

TEST_F(CudaMoe, expertsReadyAtTheGateShareOneCall) {
  if (moe::test::gpuTestsQuick())
    GTEST_SKIP() << "quick set: launch counts (one stream) are checked in full runs";
  auto spec = moe::synth::tinySpec("qwen3moe");
  const auto bytes = moe::synth::buildModel(spec).toBytes();
  auto model = moe::Model::load(moe::gguf::GgufFile::fromBytes(bytes), *gpu_);
  const auto table = moe::prepareExperts(*gpu_, model->hostExperts());
  moe::ResidentExpertSource resident(table);
  HostRoutedSource all_ready(resident);
  CacheLikeSource hits(resident, true), misses(resident, false);
  moe::Transformer a(*model, *gpu_, all_ready, 64), b(*model, *gpu_, hits, 64), c(*model, *gpu_, misses, 64);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
  std::vector<float> la, lb, lc;
  a.forward(prompt, la), b.forward(prompt, lb), c.forward(prompt, lc);
  ASSERT_TRUE(la == lb && la == lc);
  for (int32_t next : {9, 4}) {
    uint64_t launches[3];
    moe::Transformer* t[3] = {&a, &b, &c};
    std::vector<float>* l[3] = {&la, &lb, &lc};
    for (int i = 0; i < 3; ++i) {
      gpu_->synchronize();
      const auto before = cudastandin::totals().all;
      t[i]->forward(std::span(&next, 1), *l[i]);
      launches[i] = cudastandin::totals().all.kernel_launches - before.kernel_launches;
    }
    moe::test::info("decode step: %llu launches all ready, %llu ready at the gate, %llu one by one",
                    (unsigned long long)launches[0], (unsigned long long)launches[1],
                    (unsigned long long)launches[2]);
    ASSERT_EQ(launches[1], launches[0]);
    ASSERT_GT(launches[2], launches[1]);
    ASSERT_TRUE(la == lb && la == lc) << "token " << next;
  }
}
#endif

#if MOECHAT_CUDA_STANDIN
// One recording serves every position of its 256-key span (its attention's plan): a
// decode that crosses position 256 records once more there and nowhere else; after
// the sequence is cut back across it (a regenerated reply) the earlier span records
// once again; another sequence on the same backend records its own. Every step's
// logits are the host-routed path's, bit for bit.
TEST_F(CudaMoe, aRecordedStepReplaysAtLaterPositions) {
  if (moe::test::gpuTestsQuick())
    GTEST_SKIP() << "quick set: residentDecodeIsOneGraphAndOneWait replays on the same threads";
  const auto bytes = moe::synth::buildModel(moe::synth::tinySpec("gpt-oss")).toBytes();
  auto model = moe::Model::load(moe::gguf::GgufFile::fromBytes(bytes), *gpu_);
  const auto table = moe::prepareExperts(*gpu_, model->hostExperts());
  moe::ResidentExpertSource resident(table);
  HostRoutedSource host_routed(resident);
  const int n_ctx = 300, n_vocab = model->config().n_vocab;
  moe::Transformer on_device(*model, *gpu_, resident, n_ctx), on_host(*model, *gpu_, host_routed, n_ctx);
  std::vector<int32_t> prompt(250);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 37 + 5) % n_vocab);
  std::vector<float> logits_device, logits_host;
  on_device.forward(prompt, logits_device);
  on_host.forward(prompt, logits_host);
  // Steps at positions 250..261; returns how many were recorded.
  auto decode = [&](int steps, int32_t first_token) {
    int recorded = 0;
    for (int i = 0; i < steps; ++i) {
      const int32_t next = int32_t((first_token + 13 * i) % n_vocab);
      gpu_->synchronize();
      const auto before = cudastandin::totals().all;
      on_device.forward(std::span(&next, 1), logits_device);
      const auto after = cudastandin::totals().all;
      on_host.forward(std::span(&next, 1), logits_host);
      EXPECT_EQ(after.graph_launches - before.graph_launches, uint64_t(1))
          << "position " << on_device.nPast() - 1;
      EXPECT_EQ(after.kernel_launches, before.kernel_launches) << "position " << on_device.nPast() - 1;
      recorded += after.captured_kernels > before.captured_kernels ? 1 : 0;
      EXPECT_TRUE(logits_device == logits_host) << "position " << on_device.nPast() - 1 << ": logits differ";
    }
    return recorded;
  };
  ASSERT_EQ(decode(12, 3), 2);  // at 250, and at 256 (the next 256 keys)
  on_device.truncate(252);
  on_host.truncate(252);
  ASSERT_EQ(decode(3, 40), 1);  // positions 252..254: the span up to 256 again
  // A second sequence records its own step; the first then records again.
  moe::Transformer other(*model, *gpu_, resident, n_ctx);
  std::vector<float> other_logits;
  other.forward(std::span(prompt.data(), 5), other_logits);
  const int32_t token = 7;
  const auto before = cudastandin::totals().all;
  other.forward(std::span(&token, 1), other_logits);
  ASSERT_TRUE(cudastandin::totals().all.captured_kernels > before.captured_kernels);
  ASSERT_EQ(decode(1, 90), 1);  // position 255: recorded again for this sequence
}
#endif

#if MOECHAT_CUDA_STANDIN
// An op that waits for the device inside a recorded step: the recording is refused
// (StepCaptureFailed), nothing of it ran, and after the abort the same ops run one by
// one with their results; later steps are not recorded. An upload refuses only its
// own recording.
TEST_F(CudaMoe, aStepThatWaitsIsNotRecorded) {
  const auto backend = moe::makeBackend(moe::DeviceChoice::kCuda, 2);  // its own: it stops recording
  const std::vector<float> values = {1.0f, 2.0f, 3.0f, 4.0f};
  float* d = backend->allocFloats(values.size());
  std::vector<float> back(values.size(), -1.0f);
  backend->fromHost(d, values.data(), values.size());
  backend->synchronize();
  const uint64_t graphs_before = cudastandin::totals().all.graph_launches;
  // An upload inside a recording is refused for that recording only (a replay would
  // copy whatever its pinned buffer then holds): the next step may record.
  ASSERT_TRUE(backend->beginStepCapture({}));
  bool for_good = true;
  try {
    backend->fromHost(d, values.data(), values.size());
  } catch (const moe::StepCaptureFailed& e) {
    for_good = e.for_good;
  }
  ASSERT_FALSE(for_good);
  backend->abortStepCapture();
  // A wait inside a recording: refused, and no step records on this backend again.
  ASSERT_TRUE(backend->beginStepCapture({}));
  backend->zero(d, values.size());
  ASSERT_THROW(backend->toHost(back.data(), d, back.size()), moe::StepCaptureFailed);
  backend->abortStepCapture();
  ASSERT_EQ(back, std::vector<float>(values.size(), -1.0f));
  backend->toHost(back.data(), d, back.size());  // the recorded zero never ran
  ASSERT_EQ(back, values);
  backend->zero(d, values.size());
  backend->toHost(back.data(), d, back.size());
  ASSERT_EQ(back, std::vector<float>(values.size(), 0.0f));
  ASSERT_FALSE(backend->beginStepCapture({}));  // no second try
  ASSERT_EQ(cudastandin::totals().all.graph_launches, graphs_before);
  backend->freeFloats(d);
}
#endif

// A decode step of each tiny synthetic model (widened to K-quant rows): the matmul
// kernels read every byte of the weights the step uses (the experts the host names:
// their bytes are counted from the launches) at least once and at most 1.1x over.
// On the stand-in the bytes read are counted by the kernels' own weight loads;
// on a GPU the backend's count of its passes over the rows stands in for them.
TEST_F(CudaMoe, decodeReadsTheWeightsOnce) {
  if (moe::test::gpuTestsQuick())
    GTEST_SKIP() << "quick set: byte counts (one stream) are checked in full runs";
  for (auto [arch, et, wt] : {std::tuple{"qwen3moe", TensorType::Q4_K, TensorType::Q6_K},
                              std::tuple{"olmoe", TensorType::Q8_0, TensorType::Q4_0},
                              std::tuple{"deepseek", TensorType::Q5_K, TensorType::Q8_0}}) {
    auto spec = moe::synth::tinySpec(arch);
    spec.expert_type = et;
    spec.weight_type = wt;
    spec = moe::synth::fitToBlocks(spec);
    const auto bytes = moe::synth::buildModel(spec).toBytes();
    auto model = moe::Model::load(moe::gguf::GgufFile::fromBytes(bytes), *gpu_);
    const auto table = moe::prepareExperts(*gpu_, model->hostExperts());
    moe::ResidentExpertSource resident(table);
    HostRoutedSource experts(resident);
    moe::Transformer tf(*model, *gpu_, experts, 64);
    std::vector<float> logits;
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
    tf.forward(prompt, logits);
    const Backend::MatmulTraffic before = gpu_->matmulTraffic();
#if MOECHAT_CUDA_STANDIN
    const uint64_t loaded_before = cudastandin::weightBytesLoaded();
#endif
    const int32_t next = 7;
    tf.forward(std::span(&next, 1), logits);
    const Backend::MatmulTraffic after = gpu_->matmulTraffic();
    const double weights = double(after.weight_bytes - before.weight_bytes);
#if MOECHAT_CUDA_STANDIN
    const double read = double(cudastandin::weightBytesLoaded() - loaded_before);
#else
    const double read = double(after.bytes_read - before.bytes_read);
#endif
    moe::test::info("%s %s experts: a decode step reads %.0f bytes for %.0f bytes of weights (%.3fx)", arch,
                    moe::gguf::tensorTypeName(et), read, weights, read / weights);
    ASSERT_TRUE(weights > 0);
    ASSERT_TRUE(read >= weights) << moe::test::format("%s: %.3fx (a weight byte never read)", arch,
                                                      read / weights);
    ASSERT_TRUE(read <= 1.1 * weights) << moe::test::format("%s: %.3fx", arch, read / weights);
  }
}

#if MOECHAT_CUDA_STANDIN
// A session takes its device memory when it starts (the Transformer's constructor:
// KV cache, activations, every scratch buffer of the backend): a prompt longer than
// one batch and decode steps then allocate nothing, so running out of device memory
// is reported before the first token, never in the middle of a reply.
TEST_F(CudaMoe, noDeviceAllocationAfterTheSessionStarts) {
  // Quantised weights, and F16 ones (whose prefill dequantises a tile for cuBLAS).
  for (TensorType weight_type : {TensorType::Q4_0, TensorType::F16}) {
    if (moe::test::gpuTestsQuick() && weight_type != TensorType::Q4_0) continue;  // the same threads
    auto spec = moe::synth::tinySpec("qwen3moe");
    spec.expert_type = TensorType::Q8_0;
    spec.weight_type = weight_type;
    const auto bytes = moe::synth::buildModel(spec).toBytes();
    auto model = moe::Model::load(moe::gguf::GgufFile::fromBytes(bytes), *gpu_);
    const auto table = moe::prepareExperts(*gpu_, model->hostExperts());
    moe::ResidentExpertSource experts(table);
    moe::Transformer tf(*model, *gpu_, experts, 280);
    const uint64_t mallocs = cudastandin::totals().mallocs;
    std::vector<int32_t> prompt(260);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 37 + 5) % model->config().n_vocab);
    std::vector<float> logits;
    tf.forward(prompt, logits);
    for (int32_t next : {3, 5, 7}) tf.forward(std::span(&next, 1), logits);
    ASSERT_TRUE(cudastandin::totals().mallocs == mallocs)
        << std::string(moe::gguf::tensorTypeName(weight_type)) + " weights: cudaMalloc during the session";
  }
}
#endif
