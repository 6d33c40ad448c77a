// Greedy decoding a step ahead (Generator, Transformer::queueChosenStep): with every
// expert resident and the steps recorded, the step of the token the device chose is
// queued before the host reads that token. The tokens, the reason a reply stops, what
// the KV cache holds and nPast() equal today's order (the host reads each token, then
// launches its step: here a routing observer keeps the same steps on that path), for
// the tiny models of several architectures and every way a reply ends. On the stand-in
// the steady state's host waits never leave the device idle (stalling_host_syncs), and
// step n + 1's graph launch is counted before the wait for token n; models with
// recurrent layers, steps that are not recorded, experts not all in place and sampling
// from the whole row (top_k off) keep today's order: every wait stalls. (Sampled
// decoding with top_k > 0 runs a step ahead too: test_cuda_sampled_ahead.cpp.)
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/generator.h"
#include "inference/transformer.h"
#include "support/decode_ahead_replies.h"
#include "support/gpu_suite.h"
#include "support/host_routed_source.h"
#include "support/test_log.h"
#include "synth/synthetic_model.h"

#if MOECHAT_CUDA_STANDIN
#include <cuda_runtime.h>

#include "cuda_standin.h"
#endif

using moe::LogitCandidate;
using moe::LogitsReduction;
using moe::test::Reply;
using moe::test::ReplySetup;

namespace {

std::unique_ptr<moe::Backend> gpu_;  // made in CudaDecodeAhead::SetUpTestSuite

struct Tiny : moe::test::Tiny {
  explicit Tiny(const std::string& arch) : moe::test::Tiny(*gpu_, arch) {}
  explicit Tiny(const moe::gguf::GgufWriter& w) : moe::test::Tiny(*gpu_, w) {}
};

// An offload policy's view of the experts.
using NotAllInPlace = moe::test::HostRoutedSource;

Reply reply(const moe::Model& model, moe::ExpertSource& experts, const ReplySetup& s) {
  return moe::test::reply(*gpu_, model, experts, s);
}

Reply expectTodaysReply(const moe::Model& model, moe::ExpertSource& experts, const ReplySetup& s,
                        const std::string& what, bool ahead = true) {
  return moe::test::expectTodaysReply(*gpu_, model, experts, s, what, ahead);
}

moe::GenerationParams greedy(int max_tokens, float penalty, int last_n) {
  moe::GenerationParams p;
  p.max_tokens = max_tokens;
  p.stop_at_end_token = false;
  p.sampler.temperature = 0.0f;
  p.sampler.repeat_penalty = penalty;
  p.sampler.repeat_last_n = last_n;
  return p;
}

class CudaDecodeAhead : public moe::test::GpuTest {
 protected:
  static void SetUpTestSuite() {
    if (!moe::test::noCudaReason().empty()) return;  // each case skips (GpuTest)
    gpu_ = moe::makeBackend(moe::DeviceChoice::kCuda, 2);
  }
  static void TearDownTestSuite() { gpu_.reset(); }
};

}  // namespace

// Greedy tokens with the penalty off, over a window of 64, of 1 (the chosen token
// alone: listed by the device, not the host) and over the whole history.
TEST_F(CudaDecodeAhead, greedyTokensEqualTodaysOrder) {
  for (const char* arch : {"qwen3moe", "gpt-oss", "deepseek2", "minimax-m2", "olmoe", "qwen35moe"}) {
    const bool first = std::string(arch) == "qwen3moe";
    if ((moe::test::gpuTestsQuick() || moe::test::testsPathsOnce()) && !first) continue;
    Tiny tiny(arch);
    const bool recurrent = tiny.model->config().hasRecurrentLayers();
    for (auto [penalty, last_n] : {std::pair{1.3f, 64}, {1.0f, 64}, {1.3f, 1}, {1.3f, -1}}) {
      if (!first && penalty != 1.3f) continue;
      // Quick (TSan): the threads of a step ahead are the same for every penalty.
      if (moe::test::gpuTestsQuick() && !(penalty == 1.3f && last_n == 64)) continue;
      ReplySetup s;
      s.params = greedy(14, penalty, last_n);
      expectTodaysReply(*tiny.model, *tiny.resident, s,
                        moe::test::format("%s penalty %.1f over %d", arch, penalty, last_n), !recurrent);
    }
  }
}

// A reply that ends on its end token, a stop string, max_tokens, a cancel or a full
// context: the step queued ahead of the last token is dropped, as if never run.
TEST_F(CudaDecodeAhead, aReplyThatEndsLeavesTheCacheAsToday) {
  Tiny tiny("qwen3moe");
  ReplySetup plain;
  plain.params = greedy(12, 1.1f, 64);
  const Reply free_run = reply(*tiny.model, *tiny.resident, plain);
  ASSERT_EQ(free_run.tokens.size(), size_t(11));
  const int32_t fifth = free_run.tokens[4];

  ReplySetup stop_string = plain;
  for (size_t i = 4; i < free_run.tokens.size() && stop_string.params.stop_strings.empty(); ++i)
    if (const std::string text = tiny.model->tokenizer().tokenBytes(free_run.tokens[i]); !text.empty())
      stop_string.params.stop_strings = {text};
  ASSERT_FALSE(stop_string.params.stop_strings.empty());
  EXPECT_EQ(expectTodaysReply(*tiny.model, *tiny.resident, stop_string, "stop string").stats.reason,
            moe::StopReason::StopString);
  ReplySetup length = plain;
  length.params.max_tokens = 5;
  EXPECT_EQ(expectTodaysReply(*tiny.model, *tiny.resident, length, "max_tokens").stats.reason,
            moe::StopReason::Length);
  ReplySetup cancel = plain;
  cancel.cancel_after = 3;
  EXPECT_EQ(expectTodaysReply(*tiny.model, *tiny.resident, cancel, "cancel").stats.reason,
            moe::StopReason::Cancelled);
  ReplySetup full = plain;
  full.n_ctx = int(moe::test::kAheadPrompt.size()) + 6;
  EXPECT_EQ(expectTodaysReply(*tiny.model, *tiny.resident, full, "context full").stats.reason,
            moe::StopReason::ContextFull);

  auto writer = moe::synth::buildModel(moe::synth::tinySpec("qwen3moe"));
  writer.setUint32("tokenizer.ggml.eos_token_id", uint32_t(fifth));
  Tiny ends(writer);
  ReplySetup end_token = plain;
  end_token.params.stop_at_end_token = true;
  EXPECT_EQ(expectTodaysReply(*ends.model, *ends.resident, end_token, "end token").stats.reason,
            moe::StopReason::EndToken);
}

// The penalty of a step queued before the host read its token: the device's choice is
// penalised like a listed token, once where the host lists it too.
TEST_F(CudaDecodeAhead, theChosenTokenIsPenalisedOnce) {
  const int n = 5000;  // three chunks
  std::vector<float> first(n, 0.0f), second(n);
  first[4321] = 9.0f;  // the greedy choice the second reduction penalises
  for (int i = 0; i < n; ++i) second[size_t(i)] = float((i * 37) % 101) * 0.05f;
  second[4321] = 6.0f;  // the best, until penalised
  float* row1 = gpu_->allocFloats(n);
  float* row2 = gpu_->allocFloats(n);
  gpu_->fromHost(row1, first.data(), n);
  gpu_->fromHost(row2, second.data(), n);
  auto reduce = [&](float* row, LogitsReduction r) {
    gpu_->reduceLogits(row, n, r);
    std::vector<LogitCandidate> out(size_t(r.k));
    gpu_->readLogitCandidates(out);
    return out;
  };
  const std::vector<int32_t> listed = {7, 100}, listed_too = {7, 100, 4321};
  for (int k : {1, 5}) {
    ASSERT_EQ(reduce(row1, {1, 1.0f, {}, false})[0].id, 4321);
    const auto chosen = reduce(row2, {k, 4.0f, listed, true});
    const auto by_host = reduce(row2, {k, 4.0f, listed_too, false});
    ASSERT_EQ(reduce(row1, {1, 1.0f, {}, false})[0].id, 4321);
    const auto both = reduce(row2, {k, 4.0f, listed_too, true});
    for (int j = 0; j < k; ++j) {
      EXPECT_EQ(chosen[size_t(j)].id, by_host[size_t(j)].id) << "k " << k << " entry " << j;
      EXPECT_EQ(chosen[size_t(j)].value, by_host[size_t(j)].value) << "k " << k << " entry " << j;
      EXPECT_EQ(both[size_t(j)].id, by_host[size_t(j)].id) << "k " << k << " entry " << j;
      EXPECT_EQ(both[size_t(j)].value, by_host[size_t(j)].value) << "k " << k << " entry " << j;
    }
    EXPECT_NE(chosen[0].id, 4321) << "not penalised";
  }
  gpu_->freeFloats(row1);
  gpu_->freeFloats(row2);
}

#if MOECHAT_CUDA_STANDIN
namespace {

using moe::test::DecodeWaits;

DecodeWaits watchDecode(const moe::Model& model, moe::ExpertSource& experts, const moe::SamplerParams& sp,
                        int max_tokens, bool observe_routing = false) {
  return moe::test::watchDecode(*gpu_, model, experts, sp, max_tokens, observe_routing);
}

moe::SamplerParams greedySampler() {
  moe::SamplerParams sp;
  sp.temperature = 0.0f;
  return sp;
}

}  // namespace

// The steady state of a greedy resident decode: per token one graph launch, one host
// wait that does not stall (the next step is queued behind the token's copy), no
// stream wait, no kernel launched alone, no host memory pinned; the wait for token n is
// made once step n + 1 is launched. Only the last token's wait stalls: no step follows it.
TEST_F(CudaDecodeAhead, aGreedyResidentDecodeNeverStallsTheDevice) {
  Tiny tiny("qwen3moe");
  const int tokens = 16;
  const DecodeWaits w = watchDecode(*tiny.model, *tiny.resident, greedySampler(), tokens);
  moe::test::expectNoStallAhead(w, tokens, "greedy resident decode");
}

// Where the next step cannot be queued before the host reads its token, every wait
// stalls, as today: a model with recurrent layers, steps not recorded (an observer of
// the routing), experts not all in place (an offload policy's cache), tokens sampled
// from the whole row (top_k off: no draw over candidates on the device).
TEST_F(CudaDecodeAhead, todaysOrderWhereNoStepRunsAhead) {
  if (moe::test::gpuTestsQuick())
    GTEST_SKIP() << "quick set: today's order runs on the threads cuda_moe and cuda_end_to_end check";
  Tiny tiny("qwen3moe");
  NotAllInPlace cache(*tiny.resident);
  moe::SamplerParams sampled;
  sampled.temperature = 1.2f;
  sampled.top_k = 0;
  sampled.seed = 5;
  struct Case {
    const char* name;
    const moe::Model& model;
    moe::ExpertSource& experts;
    moe::SamplerParams sp;
    bool observe;
  };
  Tiny recurrent("qwen35moe");
  for (const Case& c :
       {Case{"recurrent layers", *recurrent.model, *recurrent.resident, greedySampler(), false},
        Case{"routing observed", *tiny.model, *tiny.resident, greedySampler(), true},
        Case{"experts not all in place", *tiny.model, cache, greedySampler(), false},
        Case{"sampled from the row", *tiny.model, *tiny.resident, sampled, false}}) {
    const DecodeWaits w = watchDecode(c.model, c.experts, c.sp, 8, c.observe);
    moe::test::info("%s: %d steps, %llu host waits, %llu stalling", c.name, w.steps,
                    (unsigned long long)w.work.host_syncs, (unsigned long long)w.work.stalling_host_syncs);
    ASSERT_GT(w.steps, 0) << c.name;
    EXPECT_EQ(w.work.stalling_host_syncs, w.work.host_syncs) << c.name << ": a step ran ahead";
    for (size_t i = 0; i < w.launches_at.size(); ++i)
      EXPECT_LE(w.launches_at[i], uint64_t(i + 1)) << c.name << ": a step launched ahead of wait " << i;
  }
}

// The counter itself: a host wait stalls where nothing is queued on its stream after
// what it waits for.
TEST_F(CudaDecodeAhead, aWaitWithLaterWorkQueuedDoesNotStall) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  void* dev = nullptr;
  ASSERT_EQ(cudaMalloc(&dev, 1 << 20), cudaSuccess);
  const cudastandin::StreamCounters c0 = cudastandin::counters(s);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(dev, 0, 1 << 20, s), cudaSuccess);  // later work
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  const cudastandin::StreamCounters c1 = cudastandin::counters(s);
  EXPECT_EQ(c1.host_syncs - c0.host_syncs, uint64_t(1));
  EXPECT_EQ(c1.stalling_host_syncs - c0.stalling_host_syncs, uint64_t(0));
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);  // nothing after it
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  const cudastandin::StreamCounters c2 = cudastandin::counters(s);
  EXPECT_EQ(c2.host_syncs - c1.host_syncs, uint64_t(2));
  EXPECT_EQ(c2.stalling_host_syncs - c1.stalling_host_syncs, uint64_t(2));
  EXPECT_EQ(c2.stream_syncs - c1.stream_syncs, uint64_t(1));
  ASSERT_EQ(cudaFree(dev), cudaSuccess);
  ASSERT_EQ(cudaEventDestroy(e), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}
#endif
