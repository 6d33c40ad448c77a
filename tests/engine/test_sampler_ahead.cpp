// The uniforms a sampled decode a step ahead hands to the device (Sampler::withDraw,
// takeDrawn): each token takes the uniform sample(candidates) would have drawn for it,
// in order, whether the step that was to draw it is queued, refused (its uniform goes
// to the next step) or drawn on the host after all; and what takeDrawn refuses.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "inference/sampler.h"

using moe::LogitCandidate;
using moe::LogitsReduction;
using moe::Sampler;
using moe::SamplerParams;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

SamplerParams chain(uint64_t seed) {
  SamplerParams p;  // the app's defaults: T 0.8, top_k 40, top_p 0.95, min_p 0.05, penalty 1.1
  p.seed = seed;
  return p;
}

// The sampler's uniforms, written out: the top 53 bits of each raw mt19937_64 draw.
std::vector<double> streamOf(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<double> u;
  for (size_t i = 0; i < n; ++i) u.push_back(double(rng() >> 11) * 0x1.0p-53);
  return u;
}

// top_k + 1 candidates best first, flat enough that the draw matters.
std::vector<LogitCandidate> flatCandidates(int top_k) {
  std::vector<LogitCandidate> best;
  for (int i = 0; i <= top_k; ++i) best.push_back({1.0f - 0.01f * float(i), int32_t(100 + 7 * i)});
  return best;
}

}  // namespace

TEST(SamplerAhead, eachDrawTakesTheNextUniformOfTheStream) {
  const std::vector<double> u = streamOf(42, 4);
  Sampler s(chain(42));
  const LogitsReduction plain = s.reduction({}, {});
  const LogitsReduction first = s.withDraw(plain, 0), second = s.withDraw(plain, 1);
  EXPECT_TRUE(first.draw && second.draw);
  EXPECT_EQ(first.k, 41);
  EXPECT_EQ(first.uniform, u[0]);
  EXPECT_EQ(second.uniform, u[1]);
  EXPECT_EQ(s.withDraw(plain, 0).uniform, u[0]) << "asked again before it is taken: the same";
  EXPECT_EQ(first.temperature, 0.8f);
  EXPECT_EQ(first.top_p, 0.95f);
  EXPECT_EQ(first.min_p, 0.05f);

  const std::vector<LogitCandidate> best = flatCandidates(40);
  EXPECT_EQ(s.takeDrawn(best, best[3].id), best[3].id);
  // The second step was refused (not queued): its uniform is the next step's.
  EXPECT_EQ(s.withDraw(plain, 0).uniform, u[1]);
  EXPECT_EQ(s.withDraw(plain, 1).uniform, u[2]);
}

// Where the host draws after all (a step not queued ahead), it takes the uniform a
// draw handed out and not taken, as the device would have: the same token as a
// sampler that never drew ahead.
TEST(SamplerAhead, theHostsDrawTakesTheUniformsHandedOutFirst) {
  const std::vector<LogitCandidate> best = flatCandidates(40);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Sampler ahead(chain(seed)), today(chain(seed));
    const LogitsReduction plain = ahead.reduction({}, {});
    ahead.withDraw(plain, 1);  // u0 and u1 handed out
    const int32_t first = today.sample(best);
    ASSERT_EQ(ahead.takeDrawn(best, first), first);                        // u0 taken with the device's token
    ASSERT_EQ(ahead.sample(best), today.sample(best)) << "seed " << seed;  // u1
    ASSERT_EQ(ahead.sample(best), today.sample(best)) << "seed " << seed;  // u2, fresh
  }
}

TEST(SamplerAhead, whatTakeDrawnRefuses) {
  const std::vector<LogitCandidate> best = flatCandidates(40);
  Sampler s(chain(3));
  EXPECT_THROW(s.takeDrawn(best, best[0].id), std::logic_error) << "no draw handed out";
  s.withDraw(s.reduction({}, {}), 0);
  EXPECT_THROW(s.takeDrawn(best, best[40].id), std::logic_error) << "the entry after the top_k best";
  EXPECT_THROW(s.takeDrawn(best, 7), std::logic_error) << "not a candidate";
  EXPECT_THROW(s.takeDrawn(best, -1), std::logic_error);
  const std::vector<LogitCandidate> none(41, LogitCandidate{-kInf, 0});
  EXPECT_THROW(s.takeDrawn(none, 0), std::domain_error) << "as sample(candidates)";
  EXPECT_THROW(s.takeDrawn(std::vector<LogitCandidate>(best.begin(), best.begin() + 40), best[0].id),
               std::invalid_argument)
      << "fewer than top_k + 1";
  EXPECT_EQ(s.takeDrawn(best, best[39].id), best[39].id) << "the refusals spent nothing";

  SamplerParams greedy = chain(3), row = chain(3);
  greedy.temperature = 0.0f;
  row.top_k = 0;
  EXPECT_FALSE(Sampler(greedy).drawsFromCandidates());
  EXPECT_FALSE(Sampler(row).drawsFromCandidates());
  EXPECT_TRUE(Sampler(chain(3)).drawsFromCandidates());
  Sampler g(greedy);
  EXPECT_THROW(g.withDraw(g.reduction({}, {}), 0), std::logic_error);
}
