// End to end through the CUDA backend: for each architecture a tiny
// synthetic model file is opened the way the app opens a model (EngineSession),
// and a greedy reply is generated under every offload policy (resident,
// reactive-lru, static, proactive, cpu-experts) on the CUDA backend. The reference
// is the CPU backend with every expert resident and an F16 KV cache as the GPU's,
// whose 8-bit activations the CUDA kernels quantise to the same bytes. Each run must
//   - produce the reference's greedy tokens, or differ only where rounding flips a
//     near tie: at the first token that differs, the reference's own logits for its
//     token and for the GPU's are within 1e-3 of the row's largest magnitude;
//   - keep the logits of the reference's token sequence (teacher-forced, every
//     position) close to the reference's, by one rule for every architecture: the
//     median position's NMSE below 1e-8 and every position's below 1e-4.
// Why a median and a worst position, not one NMSE over all positions: the two sides
// sum floats in other orders (the CPU in 32 FMA lanes, the stand-in's cuBLAS in
// sequence, a GPU's in tiles), and where a value lies within that difference of a
// rounding tie of its F16 KV entry or of its Q8_0 block's 8-bit activation, one
// element moves by a whole step: one position's NMSE jumps to ~1e-6. Which positions,
// if any, is a lottery of the weights, not of the architecture or the emulation:
// measured on the stand-in over seeds 1..8 of the tiny models (2026-11-28), glm4moe's
// whole-sequence NMSE ran from 5.7e-14 to 2.0e-8, qwen3moe's from 3.2e-12 to 6.2e-9,
// llama's from 4.6e-14 to 6.6e-11 (the glm4moe file measured 9.8e-14 on an H200 and
// 5.4e-8 here). With the shipped seeds the median positions measure 4.3e-15
// (gpt-oss) to 4.5e-10 (minimax-m2), the worst positions up to 6.0e-6 (gemma4, a
// Q8_0 step in layer 4). A broken kernel, a missed wait or a stale slot moves most
// positions (and usually the tokens). Skipped as a whole without a CUDA device (the
// CPU stand-in is one): each case skips (moe::test::GpuTest). The cpu-experts runs
// report how many experts the CPU computed (none where the copies are always sooner).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "app/core/engine_session.h"
#include "inference/backend_factory.h"
#include "inference/cpu/cpu_backend.h"
#include "offload/resident_expert_source.h"
#include "support/gpu_suite.h"
#include "support/test_log.h"
#include "synth/synthetic_model.h"

#if MOECHAT_CUDA_STANDIN
#include "cuda_standin.h"
#endif

namespace {

constexpr int kReplyTokens = 10;
constexpr double kMedianPositionNmse = 1e-8;
constexpr double kWorstPositionNmse = 1e-4;

struct Reply {
  std::vector<int32_t> tokens;  // prompt, then the greedy reply (but its last token, never fed back)
  std::vector<float> logits;    // teacher-forced logits of the reference's tokens, all positions
};

std::vector<int32_t> promptFor(int n_vocab) {
  std::vector<int32_t> prompt(12);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 37 + 5) % n_vocab);
  return prompt;
}

// The greedy reply to `prompt`, then (from an empty cache) the logits of `forced`.
Reply run(moe::Generator& g, moe::Transformer& t, const std::vector<int32_t>& prompt,
          const std::vector<int32_t>* forced) {
  moe::GenerationParams gp;
  gp.max_tokens = kReplyTokens;
  gp.stop_at_end_token = false;
  gp.sampler.temperature = 0;
  gp.sampler.repeat_penalty = 1;
  g.generate(prompt, gp, [](std::string_view) {});
  Reply r;
  r.tokens = g.cachedTokens();
  g.reset();
  t.forward(forced ? *forced : r.tokens, r.logits, /*all_logits=*/true);
  return r;
}

double nmse(std::span<const float> got, std::span<const float> want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = double(got[i]) - double(want[i]);
    num += d * d;
    den += double(want[i]) * double(want[i]);
  }
  return den > 0 ? num / den : num;
}

// Each position's NMSE (rows of n_vocab logits), sorted.
std::vector<double> positionNmses(const std::vector<float>& got, const std::vector<float>& want,
                                  size_t n_vocab) {
  std::vector<double> out;
  for (size_t p = 0; (p + 1) * n_vocab <= want.size(); ++p)
    out.push_back(
        nmse(std::span(got).subspan(p * n_vocab, n_vocab), std::span(want).subspan(p * n_vocab, n_vocab)));
  std::sort(out.begin(), out.end());
  return out;
}

int firstDifference(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return int(i);
  return a.size() == b.size() ? -1 : int(n);
}

std::filesystem::path modelDir() {
  return std::filesystem::temp_directory_path() / ("moechat-cuda-e2e-" + std::to_string(::getpid()));
}

}  // namespace

class CudaEndToEnd : public moe::test::GpuTest {
 protected:
  static void SetUpTestSuite() {
    if (!moe::test::noCudaReason().empty()) return;
    std::filesystem::create_directories(modelDir());
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove_all(modelDir(), ec);
  }
};

namespace {

// An architecture's tiny model file and the CPU reference's greedy reply and logits.
struct Reference {
  std::string arch, path;
  std::vector<int32_t> prompt;
  Reply reply;
  int n_vocab = 0;
};

Reference referenceFor(const std::string& arch) {
  Reference r;
  r.arch = arch;
  r.path = (modelDir() / (arch + ".gguf")).string();
  moe::synth::writeModel(moe::synth::tinySpec(arch), r.path);
  moe::CpuBackend cpu(2);
  cpu.setKvType(moe::KvType::F16);  // the GPU's cache type: the same rounding of K and V
  const auto model = moe::Model::load(moe::gguf::GgufFile::open(r.path), cpu);
  moe::ResidentExpertSource experts(model->hostExperts());
  moe::Transformer tf(*model, cpu, experts, 256);
  moe::Generator gen(*model, tf);
  r.n_vocab = model->config().n_vocab;
  r.prompt = promptFor(r.n_vocab);
  r.reply = run(gen, tf, r.prompt, nullptr);
  return r;
}

// Generates ref's reply on the CUDA backend under `policy`, every copy
// `copy_latency_us` late (the stand-in), and checks it against the reference.
// *same_tokens: whether the greedy tokens were the reference's; *counts: the
// offload engine's counters after the reply.
void checkPolicy(const Reference& ref, moe::OffloadPolicy policy, int copy_latency_us, bool* same_tokens,
                 moe::OffloadSnapshot* counts = nullptr) {
  const std::string& arch = ref.arch;
  moe::SessionOptions opts;
  opts.model_path = ref.path;
  opts.threads = 2;
  opts.n_ctx = 256;
  opts.device = moe::DeviceChoice::kCuda;
  opts.policy = policy;
  opts.budget = moe::BudgetSetting::cacheShare(0.5);
#if MOECHAT_CUDA_STANDIN
  cudastandin::setCopyLatencyMicros(copy_latency_us);
#else
  (void)copy_latency_us;
#endif
  moe::EngineSession s(opts);
  ASSERT_EQ(s.backend().name().rfind("cuda", 0), 0u) << s.backend().name();
  const Reply got = run(s.generator(), s.transformer(), ref.prompt, &ref.reply.tokens);
  s.offload().waitIdle();
  if (counts) *counts = s.offloadSnapshot();
#if MOECHAT_CUDA_STANDIN
  cudastandin::setCopyLatencyMicros(0);
#endif
  ASSERT_EQ(got.logits.size(), ref.reply.logits.size());
  const std::vector<double> positions = positionNmses(got.logits, ref.reply.logits, size_t(ref.n_vocab));
  ASSERT_FALSE(positions.empty());
  const double median = positions[positions.size() / 2], worst = positions.back();
  const int diverged = firstDifference(got.tokens, ref.reply.tokens);
  const std::string what = moe::test::format(
      "%s %s%s", arch.c_str(), moe::policyName(policy),
      copy_latency_us ? moe::test::format(", copies %d us late", copy_latency_us).c_str() : "");
  moe::test::info(
      "%-21s NMSE per position: median %.2e, worst %.2e; greedy tokens %s; %llu expert uses on the CPU",
      what.c_str(), median, worst,
      diverged < 0 ? "equal" : ("differ from position " + std::to_string(diverged)).c_str(),
      (unsigned long long)(policy == moe::OffloadPolicy::kCpuExperts ? s.offloadSnapshot().cpu_computed : 0));
  if (diverged >= 0) {  // row diverged - 1 predicted the token at `diverged`
    ASSERT_GE(diverged, int(ref.prompt.size()));
    ASSERT_LT(size_t(diverged), std::min(got.tokens.size(), ref.reply.tokens.size()));
    const size_t V = size_t(ref.n_vocab);
    const float* row = ref.reply.logits.data() + size_t(diverged - 1) * V;
    float largest = 0;
    for (size_t v = 0; v < V; ++v) largest = std::max(largest, std::fabs(row[v]));
    const float margin = row[ref.reply.tokens[size_t(diverged)]] - row[got.tokens[size_t(diverged)]];
    EXPECT_LE(margin, 1e-3f * largest) << moe::test::format(
        "%s: tokens differ at position %d where the reference's margin is %.3g of %.3g: not a near tie",
        what.c_str(), diverged, margin, largest);
  }
  EXPECT_LT(median, kMedianPositionNmse)
      << moe::test::format("%s: median position NMSE %.3e", what.c_str(), median);
  EXPECT_LT(worst, kWorstPositionNmse)
      << moe::test::format("%s: worst position NMSE %.3e", what.c_str(), worst);
  *same_tokens = diverged < 0;
}

}  // namespace

TEST_F(CudaEndToEnd, everyArchitectureEveryPolicy) {
  int runs = 0, same_tokens = 0;
  std::vector<std::string> archs = moe::synth::supportedArchs();
  if (moe::test::gpuTestsQuick())  // every policy's threads (the same for every architecture), over the
                                   // forward pass with the most kinds of kernels
    archs = {"gpt-oss"};
  for (const std::string& arch : archs) {
    const Reference ref = referenceFor(arch);
    ASSERT_EQ(ref.reply.tokens.size(), ref.prompt.size() + kReplyTokens - 1);
    for (moe::OffloadPolicy policy : moe::allPolicies()) {
      // Paths once: every architecture under proactive, every policy on the first one.
      if (moe::test::testsPathsOnce() && arch != archs.front() && policy != moe::OffloadPolicy::kProactive)
        continue;
      // Copies slower than the CPU computes a tiny expert: cpu-experts sends experts to the host.
      const int latency_us = policy == moe::OffloadPolicy::kCpuExperts ? 1000 : 0;
      bool same = false;
      ASSERT_NO_FATAL_FAILURE(checkPolicy(ref, policy, latency_us, &same));
      ++runs;
      same_tokens += same;
    }
  }
  moe::test::info("%d of %d runs produced the reference's greedy tokens", same_tokens, runs);
  if (moe::test::testsPathsOnce())
    EXPECT_EQ(runs, int(archs.size()) + 4);  // every architecture once, the first one under 5 policies
  else
    EXPECT_EQ(runs, int(archs.size()) * 5);  // every architecture (quick: 1) x 5 policies
}

#if MOECHAT_CUDA_STANDIN
// Copies slower than the kernels (the stand-in's simulated latency: each copy waits
// this long on its stream before it runs), at two latencies, under each policy that
// copies experts while the model runs: a kernel that reads an expert slot before
// its copy has landed (a missing stream wait), or a copy into a slot that queued
// kernels still read (a missing fence), gives wrong logits every time, not on an
// unlucky interleaving. (cpu-experts runs with 1000 us copies above.)
TEST_F(CudaEndToEnd, slowCopiesEveryStreamingPolicy) {
  struct LatencyReset {
    ~LatencyReset() { cudastandin::setCopyLatencyMicros(0); }
  } reset;
  const Reference ref = referenceFor("qwen3moe");
  for (int latency_us : {300, 2000})
    for (moe::OffloadPolicy policy :
         {moe::OffloadPolicy::kReactiveLru, moe::OffloadPolicy::kStatic, moe::OffloadPolicy::kProactive}) {
      // Quick: the longer latency (kernels run slower under TSan), the policies whose threads differ.
      if (moe::test::gpuTestsQuick() && (latency_us != 2000 || policy == moe::OffloadPolicy::kStatic))
        continue;
      bool same = false;
      moe::OffloadSnapshot counts;
      ASSERT_NO_FATAL_FAILURE(checkPolicy(ref, policy, latency_us, &same, &counts));
      ASSERT_TRUE(counts.device_waits > 0) << moe::policyName(policy) << ", copies " << latency_us
                                           << " us late: no kernel waited on the device for a copy";
    }
}
#endif
