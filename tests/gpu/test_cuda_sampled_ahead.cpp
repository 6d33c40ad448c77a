// Sampled decoding a step ahead (Generator, Sampler::withDraw, cuda_draw.cu): the
// device finishes the host's draw over the best top_k + 1 candidates with the uniform
// the host drew for that token, and the next step embeds the drawn token before the
// host has read it.
//   - The draw against the host's Sampler::sample(candidates) on seeded rows (ties, NaN,
//     -inf, fewer finite entries than top_k, top_k from 1 to the limit, top-p and min-p
//     at their edges, temperatures from 1e-3 to 1.5): the same token for every uniform.
//   - Whole replies against today's order (the host reads each token's candidates,
//     draws, then launches its step: a routing observer keeps the steps on that path)
//     for several seeds and sampler settings and the tiny models of cuda_decode_ahead's
//     architectures: the same tokens, stop reason, stats, nPast() and one more step's
//     logits over the cache, bit for bit on the stand-in; every way a reply ends.
//   - On the stand-in, the steady state with the app's default sampling: per token one
//     graph launch, no kernel launched alone, no stream wait, one host wait that does
//     not stall the device.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/generator.h"
#include "inference/sampler.h"
#include "support/decode_ahead_replies.h"
#include "support/gpu_suite.h"
#include "support/test_log.h"

using moe::LogitCandidate;
using moe::LogitsReduction;
using moe::SamplerParams;
using moe::test::Reply;
using moe::test::ReplySetup;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::unique_ptr<moe::Backend> gpu_;  // made in CudaSampledAhead::SetUpTestSuite

class CudaSampledAhead : public moe::test::GpuTest {
 protected:
  static void SetUpTestSuite() {
    if (!moe::test::noCudaReason().empty()) return;  // each case skips (GpuTest)
    gpu_ = moe::makeBackend(moe::DeviceChoice::kCuda, 2);
  }
  static void TearDownTestSuite() { gpu_.reset(); }
};

SamplerParams sampler(float temperature, int top_k, float top_p, float min_p, float penalty, uint64_t seed) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repeat_penalty = penalty;
  p.seed = seed;
  return p;
}

// `finite` entries in coarse levels (ties), at random places; the rest -inf or NaN.
std::vector<float> seededRow(size_t n, size_t finite, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> row(n);
  for (size_t i = 0; i < n; ++i) row[i] = i % 2 ? -kInf : std::numeric_limits<float>::quiet_NaN();
  std::vector<size_t> at(n);
  for (size_t i = 0; i < n; ++i) at[i] = i;
  std::shuffle(at.begin(), at.end(), rng);
  std::normal_distribution<float> level(0.0f, 2.5f);
  for (size_t i = 0; i < finite && i < n; ++i) row[at[i]] = std::round(level(rng) * 8.0f) / 8.0f;
  return row;
}

moe::GenerationParams sampledReply(const SamplerParams& sp, int max_tokens) {
  moe::GenerationParams p;
  p.max_tokens = max_tokens;
  p.stop_at_end_token = false;
  p.sampler = sp;
  return p;
}

}  // namespace

// The device's draw and the host's Sampler::sample(candidates), each from its own
// sampler of the same seed: the device's gets its uniforms through withDraw, the
// host's draws them itself. Several draws per row and setting (one uniform each).
TEST_F(CudaSampledAhead, theDrawEqualsTheHostsSample) {
  if (moe::test::gpuTestsQuick())
    GTEST_SKIP() << "quick set: the draw's numerics on one stream, checked in the plain and ASan stages";
  struct Shape {
    size_t vocab, finite;
    int top_k;
  };
  const std::vector<Shape> shapes = {
      {700, 700, 40},  {5000, 5000, 40},    // one chunk; three
      {700, 12, 40},   {700, 40, 40},       // fewer finite than top_k, as many: summed in id order
      {700, 41, 40},   {700, 700, 1},       // one left out; the best alone
      {700, 700, 100}, {2100, 2100, 1023},  // past the host's first sort of 64; the limit
      {300, 1, 40},
  };
  const std::vector<SamplerParams> settings = {
      sampler(0.8f, 0, 0.95f, 0.05f, 1.1f, 1),   // the app's default chain
      sampler(1.5f, 0, 1.0f, 0.0f, 1.0f, 2),     // neither cut, penalty off
      sampler(0.3f, 0, 0.5f, 0.0f, 1.3f, 3),     // top-p only
      sampler(1.5f, 0, 1.0f, 0.3f, 1.1f, 4),     // min-p only
      sampler(1e-3f, 0, 0.95f, 0.05f, 1.1f, 5),  // every weight but the best's underflows
      sampler(1.0f, 0, 0.01f, 1.0f, 1.1f, 6),    // the first token's mass; the best's ties
  };
  const int draws = moe::test::testsPathsOnce() ? 2 : 5;
  const std::vector<int32_t> history = {3, 17, 250, 299, 4000, 12};
  int checked = 0;
  std::set<int32_t> seen_wide;  // tokens of the flat, uncut setting on the widest row
  for (size_t si = 0; si < shapes.size(); ++si) {
    const Shape& shape = shapes[si];
    const std::vector<float> row = seededRow(shape.vocab, shape.finite, uint32_t(77 + si));
    float* dev = gpu_->allocFloats(row.size());
    gpu_->fromHost(dev, row.data(), row.size());
    for (SamplerParams sp : settings) {
      sp.top_k = shape.top_k;
      moe::Sampler on_device(sp), on_host(sp);
      for (int d = 0; d < draws; ++d) {
        const LogitsReduction r = on_device.withDraw(on_device.reduction(history, {}), 0);
        ASSERT_EQ(r.k, shape.top_k + 1);
        gpu_->reduceLogits(dev, int(row.size()), r);
        gpu_->queueLogitCandidates(0);
        std::vector<LogitCandidate> best(size_t(r.k));
        const int32_t drawn = gpu_->takeLogitCandidates(0, best);
        const int32_t want = on_host.sample(best);
        const int32_t got = on_device.takeDrawn(best, drawn);
        ASSERT_EQ(got, want) << "vocab " << shape.vocab << ", finite " << shape.finite << ", top_k "
                             << shape.top_k << ", T " << sp.temperature << ", top_p " << sp.top_p
                             << ", min_p " << sp.min_p << ", draw " << d;
        if (si == 1 && sp.seed == 2) seen_wide.insert(got);
        ++checked;
      }
    }
    gpu_->freeFloats(dev);
  }
  moe::test::info("%d draws on the device equal to the host's; %zu distinct of the flat setting's", checked,
                  seen_wide.size());
  EXPECT_GT(seen_wide.size(), size_t(1)) << "the draws never left the best token: the test says nothing";
}

// A row without a token (every entry NaN or -inf): the device leaves token 0 for a
// step queued on it, reports none, and the host refuses the candidates as
// sample(candidates) does.
TEST_F(CudaSampledAhead, aRowWithoutATokenIsRefusedAsToday) {
  const std::vector<float> row = seededRow(500, 0, 9);
  float* dev = gpu_->allocFloats(row.size());
  gpu_->fromHost(dev, row.data(), row.size());
  moe::Sampler s(sampler(0.8f, 40, 0.95f, 0.05f, 1.1f, 1));
  const LogitsReduction r = s.withDraw(s.reduction({}, {}), 0);
  gpu_->reduceLogits(dev, int(row.size()), r);
  gpu_->queueLogitCandidates(1);
  std::vector<LogitCandidate> best(size_t(r.k));
  const int32_t drawn = gpu_->takeLogitCandidates(1, best);
  gpu_->freeFloats(dev);
  EXPECT_EQ(drawn, -1);
  EXPECT_EQ(best[0].value, -kInf);
  EXPECT_THROW(s.takeDrawn(best, drawn), std::domain_error);
  moe::Sampler host(sampler(0.8f, 40, 0.95f, 0.05f, 1.1f, 1));
  EXPECT_THROW(host.sample(best), std::domain_error);
}

// Whole replies: seeds, the chain's parts alone and together, the penalty on and off,
// a cold and a hot temperature, on each architecture cuda_decode_ahead covers (the
// recurrent qwen35moe keeps today's order: the same reply, not decoded ahead).
TEST_F(CudaSampledAhead, sampledTokensEqualTodaysOrder) {
  struct Setting {
    const char* name;
    SamplerParams sp;
  };
  const std::vector<Setting> settings = {
      {"default", sampler(0.8f, 40, 0.95f, 0.05f, 1.1f, 1)},
      {"top-p only", sampler(0.8f, 40, 0.9f, 0.0f, 1.1f, 4)},
      {"min-p only", sampler(0.8f, 40, 1.0f, 0.1f, 1.1f, 5)},
      {"neither, penalty off", sampler(0.8f, 40, 1.0f, 0.0f, 1.0f, 6)},
      {"both, T 0.3", sampler(0.3f, 40, 0.95f, 0.05f, 1.1f, 7)},
      {"both, T 1.5", sampler(1.5f, 40, 0.95f, 0.05f, 1.1f, 8)},
  };
  for (const char* arch : {"qwen3moe", "gpt-oss", "deepseek2", "minimax-m2", "olmoe", "qwen35moe"}) {
    const bool first = std::string(arch) == "qwen3moe";
    if ((moe::test::gpuTestsQuick() || moe::test::testsPathsOnce()) && !first) continue;
    moe::test::Tiny tiny(*gpu_, arch);
    const bool recurrent = tiny.model->config().hasRecurrentLayers();
    std::set<std::vector<int32_t>> replies;
    for (size_t i = 0; i < settings.size(); ++i) {
      const Setting& setting = settings[i];
      // The other architectures: the default chain and the hot one, on one seed.
      if (!first && i != 0 && i + 1 != settings.size()) continue;
      // Quick: the default chain alone (every setting runs on the same threads).
      if (moe::test::gpuTestsQuick() && i != 0) continue;
      // Three seeds of the default chain; one each of the others.
      for (uint64_t more : {0ull, 100ull, 200ull}) {
        if ((i != 0 || !first || moe::test::gpuTestsQuick()) && more > 0) continue;
        const uint64_t seed = setting.sp.seed + more;
        ReplySetup s;
        s.params = sampledReply(setting.sp, 10);
        s.params.sampler.seed = seed;
        const Reply got = moe::test::expectTodaysReply(
            *gpu_, *tiny.model, *tiny.resident, s,
            moe::test::format("%s %s seed %llu", arch, setting.name, (unsigned long long)seed), !recurrent);
        replies.insert(got.tokens);
      }
    }
    if (first && !moe::test::gpuTestsQuick()) {
      EXPECT_GT(replies.size(), size_t(4)) << arch << ": the seeds and settings hardly change the reply";
    }
  }
}

// A sampled reply that ends on its end token, a stop string, max_tokens, a cancel or a
// full context: the step queued ahead of the last token is dropped, as if never run.
TEST_F(CudaSampledAhead, aSampledReplyThatEndsLeavesTheCacheAsToday) {
  moe::test::Tiny tiny(*gpu_, "qwen3moe");
  ReplySetup plain;
  plain.params = sampledReply(sampler(0.8f, 40, 0.95f, 0.05f, 1.1f, 11), 12);
  const Reply free_run = moe::test::reply(*gpu_, *tiny.model, *tiny.resident, plain);
  ASSERT_EQ(free_run.tokens.size(), size_t(11));
  const int32_t fifth = free_run.tokens[4];
  auto expect = [&](const moe::Model& model, moe::ExpertSource& experts, const ReplySetup& s,
                    const char* what) {
    return moe::test::expectTodaysReply(*gpu_, model, experts, s, what).stats.reason;
  };

  // Quick: the ends that race the queued step (max_tokens, a cancel); the others are
  // the host's checks on the same threads.
  const bool quick = moe::test::gpuTestsQuick();
  ReplySetup stop_string = plain;
  for (size_t i = 4; i < free_run.tokens.size() && stop_string.params.stop_strings.empty(); ++i)
    if (const std::string text = tiny.model->tokenizer().tokenBytes(free_run.tokens[i]); !text.empty())
      stop_string.params.stop_strings = {text};
  ASSERT_FALSE(stop_string.params.stop_strings.empty());
  if (!quick)
    EXPECT_EQ(expect(*tiny.model, *tiny.resident, stop_string, "stop string"), moe::StopReason::StopString);
  ReplySetup length = plain;
  length.params.max_tokens = 5;
  EXPECT_EQ(expect(*tiny.model, *tiny.resident, length, "max_tokens"), moe::StopReason::Length);
  ReplySetup one = plain;
  one.params.max_tokens = 1;
  if (!quick) EXPECT_EQ(expect(*tiny.model, *tiny.resident, one, "max_tokens 1"), moe::StopReason::Length);
  ReplySetup cancel = plain;
  cancel.cancel_after = 3;
  EXPECT_EQ(expect(*tiny.model, *tiny.resident, cancel, "cancel"), moe::StopReason::Cancelled);
  ReplySetup full = plain;
  full.n_ctx = int(moe::test::kAheadPrompt.size()) + 6;
  if (quick) return;
  EXPECT_EQ(expect(*tiny.model, *tiny.resident, full, "context full"), moe::StopReason::ContextFull);

  auto writer = moe::synth::buildModel(moe::synth::tinySpec("qwen3moe"));
  writer.setUint32("tokenizer.ggml.eos_token_id", uint32_t(fifth));
  moe::test::Tiny ends(*gpu_, writer);
  ReplySetup end_token = plain;
  end_token.params.stop_at_end_token = true;
  EXPECT_EQ(expect(*ends.model, *ends.resident, end_token, "end token"), moe::StopReason::EndToken);
}

#if MOECHAT_CUDA_STANDIN
// The steady state of a resident decode with the app's default sampling (temperature
// 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat penalty 1.1): as greedy's, the device
// never waits for the host; and the tokens are today's.
TEST_F(CudaSampledAhead, aSampledResidentDecodeNeverStallsTheDevice) {
  moe::test::Tiny tiny(*gpu_, "qwen3moe");
  const int tokens = 16;
  SamplerParams defaults;
  defaults.seed = 42;
  const moe::test::DecodeWaits w =
      moe::test::watchDecode(*gpu_, *tiny.model, *tiny.resident, defaults, tokens);
  moe::test::expectNoStallAhead(w, tokens, "sampled resident decode (the default chain)");
  const moe::test::DecodeWaits today =
      moe::test::watchDecode(*gpu_, *tiny.model, *tiny.resident, defaults, tokens, true);
  EXPECT_EQ(w.tokens, today.tokens);
  EXPECT_EQ(today.work.stalling_host_syncs, today.work.host_syncs) << "today's order: every wait stalls";
}
#endif
