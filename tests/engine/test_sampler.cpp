// Sampler semantics: greedy, determinism, top-k/top-p/min-p truncation, repetition
// penalty (both sign conventions), the empirical distribution against softmax, and
// NaN/inf logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <span>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "inference/sampler.h"
#include "support/test_log.h"

using moe::Sampler;
using moe::SamplerParams;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

SamplerParams plain(float temperature, uint64_t seed = 7) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.seed = seed;
  return p;
}

// Deterministic pseudo-random logits in [-scale, scale] (no <random> distributions).
std::vector<float> makeLogits(size_t n, uint64_t seed, float scale = 4.0f) {
  std::vector<float> v(n);
  uint64_t s = seed;
  for (float& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = scale * (float(double(s >> 11) * 0x1.0p-53) * 2.0f - 1.0f);
  }
  return v;
}

std::vector<int32_t> drawMany(SamplerParams p, const std::vector<float>& logits, int n,
                              std::span<const int32_t> history = {}) {
  Sampler s(p);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = logits;
    out.push_back(s.sample(l, history));
  }
  return out;
}

std::vector<double> softmax(const std::vector<float>& logits, double t) {
  double mx = -1e300, z = 0;
  for (float x : logits) mx = std::max(mx, double(x));
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp((logits[i] - mx) / t);
  for (double& x : p) x /= z;
  return p;
}

}  // namespace

TEST(Sampler, greedyIsArgmax) {
  std::vector<float> l = makeLogits(1000, 3);
  int32_t expect = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  Sampler s(plain(0.0f));
  ASSERT_EQ(s.sample(l, {}), expect);
  // Negative temperature is greedy too; ties go to the lowest id.
  std::vector<float> tie{1.0f, 5.0f, 2.0f, 5.0f};
  Sampler s2(plain(-1.0f));
  ASSERT_EQ(s2.sample(tie, {}), 1);
}

TEST(Sampler, sameSeedSameSequence) {
  std::vector<float> l = makeLogits(500, 11, 2.0f);
  SamplerParams p = plain(1.0f, 42);
  p.top_k = 100;
  p.top_p = 0.9f;
  auto a = drawMany(p, l, 200), b = drawMany(p, l, 200);
  ASSERT_EQ(a, b);
  p.seed = 43;
  auto c = drawMany(p, l, 200);
  ASSERT_TRUE(a != c);
}

TEST(Sampler, topK1IsGreedy) {
  std::vector<float> l = makeLogits(2000, 5);
  SamplerParams p = plain(1.5f);
  p.top_k = 1;
  Sampler greedy(plain(0.0f));
  std::vector<float> g = l;
  const int32_t expect = greedy.sample(g, {});
  for (int32_t t : drawMany(p, l, 100)) ASSERT_EQ(t, expect);
}

TEST(Sampler, tinyTopPIsGreedy) {
  std::vector<float> l = makeLogits(2000, 6, 1.0f);  // flat: top-p must still keep one
  SamplerParams p = plain(2.0f);
  p.top_p = 1e-6f;
  std::vector<float> g = l;
  const int32_t expect = Sampler(plain(0.0f)).sample(g, {});
  for (int32_t t : drawMany(p, l, 100)) ASSERT_EQ(t, expect);
}

TEST(Sampler, topKKeepsOnlyTheBestK) {
  std::vector<float> l = makeLogits(300, 8, 1.0f);
  std::vector<float> sorted = l;
  std::sort(sorted.begin(), sorted.end(), std::greater<float>());
  SamplerParams p = plain(3.0f);
  p.top_k = 10;
  for (int32_t t : drawMany(p, l, 3000)) ASSERT_TRUE(l[size_t(t)] >= sorted[9]);
}

TEST(Sampler, topPKeepsTheSmallestSufficientSet) {
  // p = {0.5, 0.3, 0.15, 0.05}: top_p 0.8 -> {0, 1} (0.5 + 0.3 reaches 0.8).
  std::vector<float> l{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplerParams p = plain(1.0f);
  p.top_p = 0.79f;
  int count[4] = {};
  for (int32_t t : drawMany(p, l, 5000)) ++count[t];
  ASSERT_TRUE(count[0] > 0 && count[1] > 0);
  ASSERT_EQ(count[2], 0);
  ASSERT_EQ(count[3], 0);
}

TEST(Sampler, topPOverManyTokensMatchesNaiveSet) {
  // Flat-ish logits over 3000 tokens: the top-p set is hundreds of tokens, beyond the
  // first sorted chunk. Compare with a naive full sort.
  std::vector<float> l = makeLogits(3000, 21, 1.5f);
  const double t = 0.9, top_p = 0.6;
  std::vector<double> p = softmax(l, t);
  std::vector<int32_t> order(l.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return l[a] != l[b] ? l[a] > l[b] : a < b; });
  std::vector<bool> in_set(l.size());
  double cum = 0;
  size_t set_size = 0;
  for (int32_t id : order) {
    in_set[size_t(id)] = true;
    ++set_size;
    cum += p[size_t(id)];
    if (cum >= top_p) break;
  }
  ASSERT_TRUE(set_size > 200);
  SamplerParams sp = plain(float(t), 31);
  sp.top_p = float(top_p);
  for (int32_t tok : drawMany(sp, l, 5000)) ASSERT_TRUE(in_set[size_t(tok)]);
}

TEST(Sampler, minPExcludesLowTokens) {
  // p_max = e^0 / z; tokens with logit < log(0.2) relative to the max fall below
  // min_p = 0.2 and must never be drawn, over many draws.
  std::vector<float> l = makeLogits(400, 9, 3.0f);
  const float mx = *std::max_element(l.begin(), l.end());
  SamplerParams p = plain(1.0f, 99);
  p.min_p = 0.2f;
  int allowed = 0;
  for (float x : l) allowed += std::exp(x - mx) >= 0.2f;
  ASSERT_TRUE(allowed > 1);
  std::vector<int> seen(l.size());
  for (int32_t t : drawMany(p, l, 20000)) {
    ASSERT_TRUE(std::exp(l[size_t(t)] - mx) >= 0.2f * (1 - 1e-5f)) << "token below min_p drawn";
    ++seen[size_t(t)];
  }
  int distinct = 0;
  for (int c : seen) distinct += c > 0;
  ASSERT_EQ(distinct, allowed);  // and every token above the threshold does occur
}

TEST(Sampler, repetitionPenaltyBothSigns) {
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 64;
  Sampler s(p);
  std::vector<float> l{4.0f, -1.0f, 3.0f, 0.0f};
  std::vector<int32_t> hist{0, 1, 1, 3};  // token 1 twice: penalised once
  ASSERT_EQ(s.sample(l, hist), 2);        // 4 / 2 = 2 < 3
  ASSERT_FLOAT_EQ(l[0], 2.0f);            // positive: divided
  ASSERT_FLOAT_EQ(l[1], -2.0f);           // negative: multiplied
  ASSERT_FLOAT_EQ(l[2], 3.0f);            // not in history
  ASSERT_FLOAT_EQ(l[3], 0.0f);            // zero stays zero
}

TEST(Sampler, repetitionPenaltyWindow) {
  SamplerParams p = plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 2;
  Sampler s(p);
  std::vector<float> l{4.0f, 3.0f, 1.0f};
  std::vector<int32_t> hist{0, 2, 2, -5, 999};  // 0 is outside the window; bad ids ignored
  ASSERT_EQ(s.sample(l, hist), 0);
  ASSERT_FLOAT_EQ(l[0], 4.0f);
  p.repeat_last_n = 0;  // off
  Sampler off(p);
  std::vector<float> l2{4.0f, 3.0f};
  std::vector<int32_t> h2{0};
  ASSERT_EQ(off.sample(l2, h2), 0);
  ASSERT_FLOAT_EQ(l2[0], 4.0f);
}

TEST(Sampler, repetitionPenaltyLowersChance) {
  std::vector<float> l{1.0f, 1.0f, 1.0f, 1.0f};
  SamplerParams p = plain(1.0f, 5);
  p.repeat_penalty = 1.5f;
  std::vector<int32_t> hist{2};
  int count[4] = {};
  for (int32_t t : drawMany(p, l, 8000, hist)) ++count[t];
  // p(2) = e^(2/3) / (3e + e^(2/3)) = 0.189 vs 0.270 for the others.
  ASSERT_TRUE(count[2] < count[0] && count[2] < count[1] && count[2] < count[3]);
  ASSERT_TRUE(std::abs(count[2] / 8000.0 - 0.189) < 0.02);
}

// 20000 draws over 10 tokens against the exact softmax at T = 0.7.
// Chi-square with 9 degrees of freedom: a correct sampler exceeds 27.88 with
// probability 0.001 (for a random seed; the seed here is fixed, so the test is
// deterministic). Per token, the standard error of a frequency is at most
// sqrt(0.25 / 20000) = 0.0035, so |freq - p| < 0.015 is a > 4-sigma bound.
TEST(Sampler, distributionMatchesSoftmax) {
  std::vector<float> l = makeLogits(10, 12, 2.0f);
  const double t = 0.7;
  std::vector<double> p = softmax(l, t);
  const int n = 20000;
  std::vector<int> count(l.size());
  for (int32_t tok : drawMany(plain(float(t), 2024), l, n)) ++count[size_t(tok)];
  double chi2 = 0, max_diff = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = p[i] * n;
    chi2 += (count[i] - e) * (count[i] - e) / e;
    max_diff = std::max(max_diff, std::abs(count[i] / double(n) - p[i]));
  }
  moe::test::info("chi2 = %.2f (9 dof, 0.1%% critical 27.88), max |freq - p| = %.4f", chi2, max_diff);
  ASSERT_TRUE(chi2 < 27.88);
  ASSERT_TRUE(max_diff < 0.015);
}

TEST(Sampler, distributionWithTruncationMatchesRenormalised) {
  // top_k 3 of 6, then renormalised softmax over those three.
  std::vector<float> l{0.5f, 2.0f, -1.0f, 1.5f, 1.0f, 0.0f};
  SamplerParams sp = plain(1.0f, 77);
  sp.top_k = 3;
  std::vector<float> kept{l[1], l[3], l[4]};
  std::vector<double> p = softmax(kept, 1.0);
  const int n = 20000;
  int c1 = 0, c3 = 0, c4 = 0;
  for (int32_t tok : drawMany(sp, l, n)) {
    ASSERT_TRUE(tok == 1 || tok == 3 || tok == 4);
    c1 += tok == 1, c3 += tok == 3, c4 += tok == 4;
  }
  ASSERT_TRUE(std::abs(c1 / double(n) - p[0]) < 0.015);
  ASSERT_TRUE(std::abs(c3 / double(n) - p[1]) < 0.015);
  ASSERT_TRUE(std::abs(c4 / double(n) - p[2]) < 0.015);
}

TEST(Sampler, largeVocabulary) {
  // 150k logits with everything on (the real-model path): valid ids, deterministic.
  std::vector<float> l = makeLogits(151936, 13, 8.0f);
  SamplerParams p;  // defaults: T 0.8, top_k 40, top_p 0.95, min_p 0.05, penalty 1.1
  p.seed = 3;
  std::vector<int32_t> hist{1, 2, 3};
  auto a = drawMany(p, l, 50, hist), b = drawMany(p, l, 50, hist);
  ASSERT_EQ(a, b);
  for (int32_t t : a) ASSERT_TRUE(t >= 0 && t < 151936);
  p.top_k = 0;  // top-p alone over the whole vocabulary
  p.min_p = 0.0f;
  for (int32_t t : drawMany(p, l, 20, hist)) ASSERT_TRUE(t >= 0 && t < 151936);
}

TEST(Sampler, nanAndInfinity) {
  // NaN counts as -inf: never drawn.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> l{nan, 1.0f, nan, 0.5f};
  for (int32_t t : drawMany(plain(1.0f), l, 2000)) ASSERT_TRUE(t == 1 || t == 3);
  std::vector<float> g{nan, 1.0f, nan};
  ASSERT_EQ(Sampler(plain(0.0f)).sample(g, {}), 1);
  // -inf tokens are never drawn.
  std::vector<float> m{-kInf, 0.0f, -kInf};
  for (int32_t t : drawMany(plain(1.0f), m, 200)) ASSERT_EQ(t, 1);
  // +inf wins (treated as the largest finite value).
  std::vector<float> p{1.0f, kInf, 3.0f};
  for (int32_t t : drawMany(plain(1.0f), p, 200)) ASSERT_EQ(t, 1);
  // Nothing drawable: throws (a broken forward pass must not pass silently).
  std::vector<float> bad{nan, -kInf, nan};
  Sampler s(plain(1.0f));
  ASSERT_THROW(s.sample(bad, {}), std::domain_error);
  std::vector<float> bad2{nan, -kInf};
  Sampler s0(plain(0.0f));
  ASSERT_THROW(s0.sample(bad2, {}), std::domain_error);
  std::vector<float> empty;
  ASSERT_THROW(s.sample(empty, {}), std::invalid_argument);
}

namespace {

// The sampler's rules written the plain way (sort everything, cut, renormalise,
// draw in id order with the same 53-bit uniform): what every shortcut in
// Sampler::sample must reproduce token for token.
int32_t referenceSample(std::vector<float> logits, std::span<const int32_t> history, const SamplerParams& p,
                        std::mt19937_64& rng) {
  const float inf = std::numeric_limits<float>::infinity();
  for (float& x : logits) x = std::isnan(x) ? -inf : x == inf ? std::numeric_limits<float>::max() : x;
  if (p.repeat_penalty != 1.0f && p.repeat_last_n != 0) {
    const size_t n = p.repeat_last_n < 0 ? history.size() : std::min(history.size(), size_t(p.repeat_last_n));
    std::vector<int32_t> seen;
    for (int32_t t : history.subspan(history.size() - n)) {
      if (t < 0 || size_t(t) >= logits.size() || std::find(seen.begin(), seen.end(), t) != seen.end())
        continue;
      seen.push_back(t);
      logits[size_t(t)] =
          logits[size_t(t)] > 0 ? logits[size_t(t)] / p.repeat_penalty : logits[size_t(t)] * p.repeat_penalty;
    }
  }
  std::vector<std::pair<float, int32_t>> c;
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] != -inf) c.emplace_back(logits[i], int32_t(i));
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (p.temperature <= 0) return c.front().second;
  if (p.top_k > 0 && size_t(p.top_k) < c.size()) c.resize(size_t(p.top_k));
  const double mx = c.front().first, inv_t = 1.0 / double(p.temperature);
  auto w = [&](size_t i) { return std::exp((double(c[i].first) - mx) * inv_t); };
  double z = 0;
  for (size_t i = 0; i < c.size(); ++i) z += w(i);
  size_t kept = c.size();
  if (p.top_p < 1.0f) {
    double cum = 0;
    size_t i = 0;
    for (; i < c.size(); ++i)
      if ((cum += w(i)) >= double(p.top_p) * z) break;
    kept = std::min(c.size(), i + 1);
  }
  if (p.min_p > 0.0f) {
    size_t i = 1;
    while (i < kept && w(i) >= double(p.min_p) * w(0)) ++i;
    kept = i;
  }
  std::vector<std::pair<float, int32_t>> k(c.begin(), c.begin() + std::ptrdiff_t(kept));
  std::sort(k.begin(), k.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  double total = 0;
  for (const auto& e : k) total += std::exp((double(e.first) - mx) * inv_t);
  const double r = double(rng() >> 11) * 0x1.0p-53 * total;
  double cum = 0;
  for (const auto& e : k)
    if (r < (cum += std::exp((double(e.first) - mx) * inv_t))) return e.second;
  return k.back().second;
}

}  // namespace

// Token for token what the plain rules give, over vocabularies with ties, -inf,
// NaN and +inf, and every switch: the top-k selection's shortcuts change nothing.
TEST(Sampler, matchesThePlainRulesTokenForToken) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t vocab : {size_t(7), size_t(300), size_t(5000), size_t(201088)}) {
    std::vector<float> base = makeLogits(vocab, vocab, 6.0f);
    for (size_t i = 0; i < vocab; i += 7) base[i] = std::round(base[i]);  // ties
    if (vocab > 10) base[3] = nan, base[5] = -kInf;
    if (vocab == 300) base[9] = kInf;  // elsewhere it would win every draw
    std::vector<int32_t> hist;
    for (int i = 0; i < 80; ++i) hist.push_back(int32_t((i * 131) % vocab));
    for (int top_k : {0, 1, 5, 40, 1000}) {
      for (float top_p : {1.0f, 0.9f}) {
        SamplerParams p;
        p.temperature = 0.8f;
        p.top_k = top_k;
        p.top_p = top_p;
        p.min_p = top_k == 40 ? 0.05f : 0.0f;
        p.repeat_penalty = top_k == 5 ? 1.0f : 1.1f;
        p.seed = 11 + uint64_t(top_k);
        Sampler s(p);
        std::mt19937_64 rng(p.seed);
        for (int draw = 0; draw < (vocab > 10000 ? 4 : 30); ++draw) {
          std::vector<float> l = base;
          for (size_t i = 0; i < vocab; i += 97) l[i] += 0.01f * float(draw);  // a new step's logits
          const std::vector<float> copy = l;
          ASSERT_EQ(s.sample(l, hist), referenceSample(copy, hist, p, rng))
              << "vocab " << vocab << ", top_k " << top_k << ", top_p " << top_p << ", draw " << draw;
        }
      }
    }
  }
}

namespace {

// What a backend's reduceLogits hands back, written the plain way: the row sanitised
// and penalised as the reduction says, sorted best first, its first k entries
// ({-inf, -1} past the row's end).
std::vector<moe::LogitCandidate> reducedOnTheHost(std::vector<float> row, const moe::LogitsReduction& r) {
  for (float& x : row) x = std::isnan(x) ? -kInf : x == kInf ? std::numeric_limits<float>::max() : x;
  for (int32_t t : r.penalised)
    if (t >= 0 && size_t(t) < row.size())
      row[size_t(t)] = row[size_t(t)] > 0 ? row[size_t(t)] / r.penalty : row[size_t(t)] * r.penalty;
  std::vector<moe::LogitCandidate> all;
  for (size_t i = 0; i < row.size(); ++i) all.push_back({row[i], int32_t(i)});
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.value != b.value ? a.value > b.value : a.id < b.id;
  });
  all.resize(size_t(r.k), moe::LogitCandidate{-kInf, -1});
  return all;
}

}  // namespace

// From the best top_k + 1 entries (what a device reduces the row to) the sampler draws
// the token it draws from the whole row, seed for seed: greedy, every top-k with and
// without top-p and min-p, vocabularies with fewer finite tokens than k, ties, NaN and
// +-inf, the penalty's window over the history and the step's own tokens.
TEST(Sampler, candidatesGiveTheRowsToken) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t vocab : {size_t(7), size_t(300), size_t(5000)}) {
    std::vector<float> base = makeLogits(vocab, vocab + 1, 6.0f);
    for (size_t i = 0; i < vocab; i += 7) base[i] = std::round(base[i]);  // ties
    base[3] = nan, base[5] = -kInf;
    if (vocab == 300) base[9] = kInf;
    std::vector<int32_t> hist;
    for (int i = 0; i < 80; ++i) hist.push_back(int32_t((i * 131) % vocab));
    for (float temperature : {0.0f, 0.8f})
      for (int top_k : {1, 5, 40, 1000})
        for (float top_p : {1.0f, 0.9f}) {
          SamplerParams p;
          p.temperature = temperature;
          p.top_k = top_k;
          p.top_p = top_p;
          p.min_p = top_k == 40 ? 0.05f : 0.0f;
          p.repeat_penalty = top_k == 5 ? 1.0f : 1.3f;
          p.repeat_last_n = top_k == 1000 ? -1 : 64;
          p.seed = 5 + uint64_t(top_k);
          Sampler from_row(p), from_best(p);
          for (int draw = 0; draw < 30; ++draw) {
            std::vector<float> l = base;
            for (size_t i = 0; i < vocab; i += 97) l[i] += 0.01f * float(draw);
            const std::vector<int32_t> step = {int32_t((draw * 7) % vocab)};
            const moe::LogitsReduction r = from_best.reduction(hist, step);
            ASSERT_EQ(r.k, temperature <= 0 ? 1 : top_k + 1);
            const std::vector<moe::LogitCandidate> best = reducedOnTheHost(l, r);
            std::vector<int32_t> full = hist;
            full.push_back(step[0]);
            ASSERT_EQ(from_best.sample(best), from_row.sample(l, full))
                << "vocab " << vocab << ", temperature " << temperature << ", top_k " << top_k << ", top_p "
                << top_p << ", draw " << draw;
            hist.push_back(step[0]);
            hist.erase(hist.begin());
          }
        }
  }
  // top_k off: the whole row is needed; nothing drawable: the row's error.
  SamplerParams off = plain(1.0f);
  ASSERT_EQ(Sampler(off).reduction({}, {}).k, 0);
  Sampler greedy(plain(0.0f));
  const std::vector<moe::LogitCandidate> none = {{-kInf, 0}};
  ASSERT_THROW(greedy.sample(none), std::domain_error);
}

// A step queued before the host read its token (the device's greedy choice): the host
// lists the rest of the penalty's window, and the token joins it, unless listed.
TEST(Sampler, aChosenTokensReductionListsTheRestOfTheWindow) {
  const std::vector<int32_t> hist = {4, 9, 4, 2, 7, 7, 1}, more = {3};
  for (float penalty : {1.0f, 1.3f})
    for (int last_n : {0, 1, 2, 4, 64, -1})
      for (int32_t chosen : {7, 3, 11}) {
        SamplerParams p = plain(0.0f);
        p.repeat_penalty = penalty;
        p.repeat_last_n = last_n;
        Sampler s(p);
        const moe::LogitsReduction ahead = s.reductionOfChosen(hist, more);
        std::vector<int32_t> got(ahead.penalised.begin(), ahead.penalised.end());
        ASSERT_EQ(ahead.penalise_chosen, penalty != 1.0f && last_n != 0);
        if (ahead.penalise_chosen && std::find(got.begin(), got.end(), chosen) == got.end())
          got.push_back(chosen);
        std::sort(got.begin(), got.end());
        std::vector<int32_t> known = more;
        known.push_back(chosen);
        const moe::LogitsReduction r = s.reduction(hist, known);
        ASSERT_EQ(got, std::vector<int32_t>(r.penalised.begin(), r.penalised.end()))
            << "penalty " << penalty << ", last " << last_n << ", chosen " << chosen;
      }
}
