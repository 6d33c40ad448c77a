// Sampling on the device (Backend::reduceLogits, cuda_sampling.cu): the best k entries
// of a logits row after the sampler's sanitise and repetition penalty, against the
// same written the plain way on the host (sort everything), bit for bit: rows with
// NaN, +-inf, -0, ties, rows shorter than k and of sizes around the kernels' chunk,
// k from 1 (the argmax) to the limit. Then whole generations: greedy and seeded
// sampled tokens of a CUDA generation that reads back only the candidates equal the
// tokens of the whole row read back and sampled on the host, recorded as one graph per
// step or op by op, and a decode token reads back at most k x 8 bytes. (Decoding
// runs a step ahead on the graph path, greedy and sampled: test_cuda_decode_ahead.cpp,
// test_cuda_sampled_ahead.cpp.)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/generator.h"
#include "inference/sampler.h"
#include "inference/transformer.h"
#include "models/gguf.h"
#include "offload/resident_expert_source.h"
#include "support/gpu_suite.h"
#include "support/test_log.h"
#include "synth/synthetic_model.h"

#if MOECHAT_CUDA_STANDIN
#include "cuda_standin.h"
#endif

using moe::Backend;
using moe::LogitCandidate;
using moe::LogitsReduction;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int kMaxK = 1024;  // cuda::kMaxTopLogits

std::unique_ptr<Backend> gpu_;  // made in CudaSampling::SetUpTestSuite

class CudaSampling : public moe::test::GpuTest {
 protected:
  static void SetUpTestSuite() {
    if (!moe::test::noCudaReason().empty()) return;  // each case skips (GpuTest)
    gpu_ = moe::makeBackend(moe::DeviceChoice::kCuda, 2);
    moe::test::info("backend: %s", gpu_->name().c_str());
  }
  static void TearDownTestSuite() { gpu_.reset(); }
};

// The reduction written the plain way: sanitise, the penalty once per listed token,
// sort best first (higher value, then lower id), the first k ({-inf, -1} past the row).
std::vector<LogitCandidate> reducedOnTheHost(std::vector<float> row, const LogitsReduction& r) {
  for (float& x : row) x = std::isnan(x) ? -kInf : x == kInf ? std::numeric_limits<float>::max() : x;
  if (r.penalty != 1.0f)
    for (int32_t t : r.penalised)
      if (t >= 0 && size_t(t) < row.size())
        row[size_t(t)] = row[size_t(t)] > 0 ? row[size_t(t)] / r.penalty : row[size_t(t)] * r.penalty;
  std::vector<LogitCandidate> all;
  for (size_t i = 0; i < row.size(); ++i) all.push_back({row[i], int32_t(i)});
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.value != b.value ? a.value > b.value : a.id < b.id;
  });
  all.resize(size_t(r.k), LogitCandidate{-kInf, -1});
  return all;
}

std::vector<LogitCandidate> reducedOnTheDevice(const std::vector<float>& row, const LogitsReduction& r) {
  float* dev = gpu_->allocFloats(row.size());
  gpu_->fromHost(dev, row.data(), row.size());
  gpu_->reduceLogits(dev, int(row.size()), r);
  std::vector<LogitCandidate> out(size_t(r.k));
  gpu_->readLogitCandidates(out);
  gpu_->freeFloats(dev);
  return out;
}

// Values in a few coarse levels (many ties), some NaN, +-inf, -0 and +0.
std::vector<float> awkwardRow(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> level(-40, 40), kind(0, 99);
  std::vector<float> row(n);
  for (float& x : row) {
    const int k = kind(rng);
    x = k < 3    ? std::numeric_limits<float>::quiet_NaN()
        : k < 5  ? -kInf
        : k < 6  ? kInf
        : k < 8  ? -0.0f
        : k < 10 ? 0.0f
                 : float(level(rng)) * 0.25f;
  }
  return row;
}

}  // namespace

TEST_F(CudaSampling, bestEntriesEqualThePlainSort) {
  const std::vector<size_t> vocabs = {1, 7, 100, 2047, 2048, 2049, 5001, 20011};
  const std::vector<int> ks = {1, 2, 3, 40, 41, 257, 1000, kMaxK};
  int cases = 0;
  for (size_t vocab : vocabs)
    for (int k : ks) {
      if (vocab > 5001 && k != 1 && k != 41 && k != kMaxK) continue;  // the stand-in's time
      // Once per path: the argmax, one sort, several merge tiles.
      if (moe::test::testsPathsOnce() && k != 1 && k != 41 && !(k == kMaxK && vocab > 5001)) continue;
      const std::vector<float> row = awkwardRow(vocab, uint32_t(vocab * 31 + size_t(k)));
      std::vector<int32_t> penalised;  // every 3rd id, and some past the row
      for (int32_t t = 0; t < int32_t(vocab) + 5; t += 3) penalised.push_back(t);
      for (float penalty : {1.0f, 1.3f, 0.7f}) {
        const LogitsReduction r{k, penalty, penalised};
        const std::vector<LogitCandidate> want = reducedOnTheHost(row, r);
        const std::vector<LogitCandidate> got = reducedOnTheDevice(row, r);
        for (size_t i = 0; i < want.size(); ++i) {
          uint32_t a = 0, b = 0;
          std::memcpy(&a, &want[i].value, 4);
          std::memcpy(&b, &got[i].value, 4);
          // -0 and +0 are one value to the sampler: either may come back.
          const bool same_value = a == b || (want[i].value == 0.0f && got[i].value == 0.0f);
          ASSERT_TRUE(same_value && want[i].id == got[i].id)
              << "vocab " << vocab << ", k " << k << ", penalty " << penalty << ", entry " << i << ": want {"
              << want[i].value << ", " << want[i].id << "}, got {" << got[i].value << ", " << got[i].id
              << "}";
        }
        ++cases;
      }
    }
  moe::test::info("%d rows reduced on the device, each entry equal to the plain sort's", cases);
}

// Rows where nothing can be drawn, a single token, all ties: the argmax is the lowest id.
TEST_F(CudaSampling, edgeRows) {
  const LogitsReduction greedy{1, 1.0f, {}};
  const std::vector<float> dead(3000, -kInf);
  ASSERT_EQ(reducedOnTheDevice(dead, greedy)[0].value, -kInf);
  std::vector<float> nans(3000, std::numeric_limits<float>::quiet_NaN());
  ASSERT_EQ(reducedOnTheDevice(nans, greedy)[0].value, -kInf);
  const std::vector<float> ties(5000, 1.5f);
  for (int k : {1, 4, 300}) {
    const std::vector<LogitCandidate> got = reducedOnTheDevice(ties, {k, 1.0f, {}});
    for (int i = 0; i < k; ++i) ASSERT_EQ(got[size_t(i)].id, i) << "k " << k;
  }
  std::vector<float> inf_late(4500, 2.0f);
  inf_late[4400] = kInf;  // sanitised to the largest float: still the best
  ASSERT_EQ(reducedOnTheDevice(inf_late, greedy)[0].id, 4400);
  ASSERT_EQ(reducedOnTheDevice(inf_late, greedy)[0].value, std::numeric_limits<float>::max());
  ASSERT_THROW(gpu_->reduceLogits(nullptr, 10, {kMaxK + 1, 1.0f, {}}), std::invalid_argument);
}

namespace {

struct Generated {
  std::vector<int32_t> tokens;
  moe::GenerationStats stats;
  double d2h_per_decode_token = -1;  // the stand-in's count; -1 on a GPU
  double graphs_per_decode_token = -1, launches_per_decode_token = -1;
  uint64_t recorded_kernels = 0;  // kernels recorded into graphs over the decode steps
};

const std::vector<int32_t> kPrompt = {1, 2, 3, 4, 5, 6, 7, 3, 2};
constexpr int kTokens = 12;

// The generator: the backend reduces the logits. `op_by_op`: a routing observer keeps
// every step off the graph (the host routes each MoE layer).
Generated generate(const moe::Model& model, moe::ExpertSource& experts, const moe::SamplerParams& sp,
                   bool op_by_op, const std::vector<int32_t>& prompt = kPrompt) {
  moe::Transformer t(model, *gpu_, experts, 128);
  if (op_by_op) t.setRoutingObserver([](const moe::RoutingEvent&) {});
#if MOECHAT_CUDA_STANDIN
  cudastandin::DeviceCounters at_decode{};
  t.setBatchObserver([&, seen = false](const moe::BatchEvent& ev) mutable {
    if (seen || ev.first_pos < int(prompt.size())) return;
    seen = true;
    at_decode = cudastandin::totals();
  });
#endif
  moe::Generator g(model, t);
  moe::GenerationParams p;
  p.max_tokens = kTokens;
  p.sampler = sp;
  p.stop_at_end_token = false;
  Generated out;
  out.stats = g.generate(prompt, p, nullptr);
  out.tokens.assign(g.cachedTokens().begin() + std::ptrdiff_t(prompt.size()), g.cachedTokens().end());
#if MOECHAT_CUDA_STANDIN
  const auto end = cudastandin::totals();
  const double n = out.stats.decode_steps;
  out.d2h_per_decode_token = double(end.all.bytes_d2h - at_decode.all.bytes_d2h) / n;
  out.graphs_per_decode_token = double(end.all.graph_launches - at_decode.all.graph_launches) / n;
  out.launches_per_decode_token = double(end.all.kernel_launches - at_decode.all.kernel_launches) / n;
  out.recorded_kernels = end.all.captured_kernels - at_decode.all.captured_kernels;
#endif
  return out;
}

// The whole row read back every step and sampled on the host, as before the reduction.
std::vector<int32_t> generateFromRows(const moe::Model& model, moe::ExpertSource& experts,
                                      const moe::SamplerParams& sp,
                                      const std::vector<int32_t>& prompt = kPrompt) {
  moe::Transformer t(model, *gpu_, experts, 128);
  moe::Sampler sampler(sp);
  std::vector<int32_t> history = prompt, out;
  std::vector<float> logits;
  t.forward(prompt, logits);
  for (int i = 0; i < kTokens; ++i) {
    const int32_t next = sampler.sample(logits, history);
    out.push_back(next);
    history.push_back(next);
    if (i + 1 < kTokens) t.forward(std::span(&next, 1), logits);
  }
  return out;
}

}  // namespace

TEST_F(CudaSampling, generationEqualsTheWholeRowsTokens) {
  for (const char* arch : {"qwen3moe", "gpt-oss"}) {
    // The quick and the once-per-path sets: one architecture (the same kernels and graph).
    if ((moe::test::gpuTestsQuick() || moe::test::testsPathsOnce()) && std::string(arch) != "qwen3moe")
      continue;
    const auto bytes = moe::synth::buildModel(moe::synth::tinySpec(arch)).toBytes();
    auto model = moe::Model::load(moe::gguf::GgufFile::fromBytes(bytes), *gpu_);
    const auto table = moe::prepareExperts(*gpu_, model->hostExperts());
    moe::ResidentExpertSource resident(table);
    moe::SamplerParams greedy;
    greedy.temperature = 0.0f;
    greedy.repeat_penalty = 1.3f;
    moe::SamplerParams sampled;  // the defaults: top_k 40, top_p 0.95, min_p 0.05, penalty 1.1
    sampled.temperature = 1.5f;  // flat enough that the draws differ from greedy
    sampled.seed = 1234;
    moe::SamplerParams wide = sampled;  // a large k: a quarter of the vocabulary
    wide.top_k = model->config().n_vocab / 4;
    wide.top_p = 1.0f;
    wide.min_p = 0.0f;
    wide.seed = 99;
    for (const auto& [name, sp] :
         {std::pair{"greedy", greedy}, {"top-k 40", sampled}, {"top-k n_vocab/4", wide}}) {
      const std::vector<int32_t> want = generateFromRows(*model, resident, sp);
      ASSERT_LE(sp.top_k + 1, kMaxK);
      for (bool op_by_op : {false, true}) {
        const Generated got = generate(*model, resident, sp, op_by_op);
        const int k = sp.temperature <= 0 ? 1 : sp.top_k + 1;
        moe::test::info(
            "%s (%d tokens) %s %s: %d tokens, read back per decode token %.1f bytes (stand-in: %.1f), %.2f "
            "graph "
            "launches, %.2f kernel launches",
            arch, model->config().n_vocab, name, op_by_op ? "op by op" : "graph", int(got.tokens.size()),
            double(got.stats.decode_logits_bytes) / got.stats.decode_steps, got.d2h_per_decode_token,
            got.graphs_per_decode_token, got.launches_per_decode_token);
        // The cache holds every token but the last sampled (never run).
        ASSERT_EQ(got.tokens, std::vector<int32_t>(want.begin(), want.end() - 1))
            << arch << " " << name << (op_by_op ? " op by op" : " graph");
        ASSERT_TRUE(got.stats.sampled_on_backend) << arch << " " << name;
        ASSERT_EQ(got.stats.decode_logits_bytes,
                  uint64_t(got.stats.decode_steps) * k * sizeof(LogitCandidate));
#if MOECHAT_CUDA_STANDIN
        // What crossed to the host per decode token: the candidates, nothing of the row
        // (op by op the routing too: k ids and weights per MoE layer).
        const double routing =
            op_by_op ? 2.0 * 4 * model->config().n_expert_used * model->config().n_layer : 0;
        ASSERT_LE(got.d2h_per_decode_token, k * 8.0 + routing + 16)
            << arch << " " << name << ": the logits row came back";
        if (!op_by_op) {
          ASSERT_EQ(got.graphs_per_decode_token, 1.0) << arch << " " << name;
          ASSERT_EQ(got.launches_per_decode_token, 0.0) << arch << " " << name << ": kernels launched alone";
        }
#endif
      }
    }
  }
}

// The penalty over the whole history (repeat_last_n -1): the penalised ids are copied
// before each step's graph, as many as there are (up to the room reserved for the
// context), so a history that grows past 64 ids replays the same recording; the
// tokens stay the row's.
TEST_F(CudaSampling, aLongHistoryReplaysTheRecording) {
  const auto bytes = moe::synth::buildModel(moe::synth::tinySpec("qwen3moe")).toBytes();
  auto model = moe::Model::load(moe::gguf::GgufFile::fromBytes(bytes), *gpu_);
  const auto table = moe::prepareExperts(*gpu_, model->hostExperts());
  moe::ResidentExpertSource resident(table);
  std::vector<int32_t> prompt;
  for (int32_t t = 0; t < 62; ++t) prompt.push_back(t * 5 % model->config().n_vocab);  // 62 distinct
  moe::SamplerParams sp;
  sp.temperature = 1.5f;
  sp.repeat_last_n = -1;
  sp.repeat_penalty = 1.2f;
  sp.seed = 77;
  const std::vector<int32_t> want = generateFromRows(*model, resident, sp, prompt);
  const Generated got = generate(*model, resident, sp, false, prompt);
  ASSERT_EQ(got.tokens, std::vector<int32_t>(want.begin(), want.end() - 1));
  std::vector<int32_t> distinct = prompt;
  distinct.insert(distinct.end(), got.tokens.begin(), got.tokens.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  ASSERT_GT(distinct.size(), size_t(64)) << "the history never outgrew 64 ids";
#if MOECHAT_CUDA_STANDIN
  // The same steps with the penalty's window at 64 ids record once.
  moe::SamplerParams window = sp;
  window.repeat_last_n = 64;
  const Generated once = generate(*model, resident, window, false, prompt);
  moe::test::info("%zu distinct tokens penalised at the end: %llu kernels recorded (window of 64: %llu)",
                  distinct.size(), (unsigned long long)got.recorded_kernels,
                  (unsigned long long)once.recorded_kernels);
  ASSERT_EQ(got.graphs_per_decode_token, 1.0);
  ASSERT_EQ(got.recorded_kernels, once.recorded_kernels) << "recorded again as the history grew";
#endif
}
