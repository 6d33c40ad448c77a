// bench --sampler: the token sampler alone on a vocabulary of logits, per token
// (greedy, and the app's default chain), against the time to read the logits once
// (a copy of the same bytes in the same run): what picking a token costs the host
// at each decode step; and the host's part when a device has reduced the row to the
// chain's top_k + 1 candidates (Backend::reduceLogits).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "inference/sampler.h"

namespace moe::cli {
namespace {

// Deterministic logits spread like a real model's (a few tall, most low).
std::vector<float> spreadLogits(size_t n) {
  std::vector<float> v(n);
  uint64_t s = 1;
  for (float& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = double(s >> 11) * 0x1.0p-53;
    x = float(12.0 * u * u * u - 4.0);
  }
  return v;
}

template <typename F>
double microsecondsPerCall(int calls, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) f(i);
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
}

}  // namespace

int runBenchSampler(const std::vector<std::string>& argv) {
  const Args args(argv, {"--vocab", "--calls"}, {"--sampler", "--json"});
  const int vocab = args.intOr("--vocab", 201088);  // gpt-oss's; Qwen3's is 151936
  const int calls = args.intOr("--calls", 200);
  if (vocab < 64 || calls < 1) throw UsageError("--vocab must be >= 64 and --calls >= 1");
  const std::vector<float> base = spreadLogits(size_t(vocab));
  std::vector<int32_t> history(64);
  for (size_t i = 0; i < history.size(); ++i) history[i] = int32_t(i * 2654435761u % uint32_t(vocab));
  std::vector<float> logits(base.size());
  int64_t sink = 0;
  const double copy_us = microsecondsPerCall(calls, [&](int) {
    std::memcpy(logits.data(), base.data(), base.size() * sizeof(float));
    sink += int64_t(logits[size_t(sink) % logits.size()] > 0);
  });
  auto run = [&](SamplerParams p) {
    Sampler s(p);
    return microsecondsPerCall(calls, [&](int) {
      std::memcpy(logits.data(), base.data(), base.size() * sizeof(float));
      sink += s.sample(logits, history);
    });
  };
  SamplerParams greedy;
  greedy.temperature = 0;
  const double greedy_us = run(greedy) - copy_us;
  const double chain_us =
      run(SamplerParams{}) - copy_us;  // T 0.8, top-k 40, top-p 0.95, min-p 0.05, penalty 1.1
  // The candidates a device hands back for the default chain (the row's best top_k + 1
  // after the penalty, made here once): the host's share is the penalty's id list and
  // the draw over them.
  double from_candidates_us = 0;
  {
    Sampler s{SamplerParams{}};
    const LogitsReduction r = s.reduction(history, {});
    std::vector<float> row = base;
    for (int32_t t : r.penalised)
      row[size_t(t)] = row[size_t(t)] > 0 ? row[size_t(t)] / r.penalty : row[size_t(t)] * r.penalty;
    std::vector<LogitCandidate> best(row.size());
    for (size_t i = 0; i < row.size(); ++i) best[i] = {row[i], int32_t(i)};
    std::partial_sort(best.begin(), best.begin() + r.k, best.end(), [](const auto& a, const auto& b) {
      return a.value != b.value ? a.value > b.value : a.id < b.id;
    });
    best.resize(size_t(r.k));
    from_candidates_us = microsecondsPerCall(calls, [&](int) {
      s.reduction(history, {});
      sink += s.sample(best);
    });
  }
  SamplerParams top_p_only;
  top_p_only.top_k = 0;
  top_p_only.min_p = 0;
  const double top_p_us = run(top_p_only) - copy_us;
  if (args.flag("--json"))
    std::printf(
        "{\"vocab\": %d, \"calls\": %d, \"copy_logits_us\": %.2f, \"greedy_us\": %.2f, \"default_chain_us\": "
        "%.2f, \"top_p_only_us\": %.2f, \"default_chain_from_candidates_us\": %.2f}\n",
        vocab, calls, copy_us, greedy_us, chain_us, top_p_us, from_candidates_us);
  else
    std::printf(
        "sampler, %d-token vocabulary, %d calls each (copying the logits once: %.1f us, not counted):\n"
        "  greedy (penalty 1.1):                          %8.1f us per token\n"
        "  default chain (T 0.8, top-k 40, top-p 0.95, min-p 0.05, penalty 1.1): %8.1f us per token\n"
        "  top-p 0.95 alone over the whole vocabulary:    %8.1f us per token\n"
        "  default chain from a device's top-k + 1 candidates (the host's part): %8.1f us per token\n",
        vocab, calls, copy_us, greedy_us, chain_us, top_p_us, from_candidates_us);
  return sink == -1 ? 1 : 0;  // keeps the draws from being optimised away
}

}  // namespace moe::cli
