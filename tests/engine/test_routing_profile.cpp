// Routing profiles (offload/routing/routing_profile.h): the figures measured off a
// trace by hand, the text form and its errors, the shipped gpt-oss-20b profile
// against the published figures, and routing synthesized from it: the figures it
// was fitted to, what demand caches hit on it, any routing shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "offload/routing/demand_cache.h"
#include "offload/routing/routing_profile.h"
#include "offload/routing/routing_trace.h"
#include "support/run_program.h"
#include "support/temp_dir.h"
#include "synth/synthetic_model.h"

using namespace moe;

namespace {

// One sequence, [tokens][layers][k] ids (weights 1/k).
RoutingTrace traceOf(int n_layer, int n_expert, int k,
                     const std::vector<std::vector<std::vector<int>>>& tokens) {
  RoutingTrace t;
  t.n_layer = n_layer, t.n_expert = n_expert, t.k = k;
  t.source = "by hand";
  std::vector<uint16_t> ids;
  std::vector<float> w;
  for (const auto& token : tokens)
    for (const auto& layer : token)
      for (const int e : layer) {
        ids.push_back(uint16_t(e));
        w.push_back(1.0f / float(k));
      }
  t.addSequence(ids, w);
  return t;
}

double meanOf(const RoutingProfile& p, double LayerRoutingProfile::*field) {
  double s = 0;
  for (const auto& l : p.layers) s += l.*field;
  return s / double(p.layers.size());
}

double topEightShare(const RoutingProfile& p) {
  double s = 0;
  for (const auto& l : p.layers)
    for (size_t r = 0; r < 8 && r < l.popularity.size(); ++r) s += l.popularity[r];
  return s / double(p.layers.size());
}

// Uniform routing of a trace's shape and length (k distinct experts per token and layer).
RoutingTrace uniformLike(const RoutingTrace& like) {
  RoutingTrace u;
  u.n_layer = like.n_layer, u.n_expert = like.n_expert, u.k = like.k;
  std::vector<uint16_t> ids, all(size_t(like.n_expert));
  std::vector<float> w;
  for (size_t e = 0; e < all.size(); ++e) all[e] = uint16_t(e);
  uint64_t x = 12345;
  for (int i = 0; i < like.tokens() * like.n_layer; ++i) {
    for (int j = 0; j < like.k; ++j) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(all[size_t(j)], all[size_t(j) + (x >> 33) % (all.size() - size_t(j))]);
    }
    ids.insert(ids.end(), all.begin(), all.begin() + like.k);
    w.insert(w.end(), size_t(like.k), 1.0f / float(like.k));
  }
  u.addSequence(ids, w);
  return u;
}

}  // namespace

// 16 experts top-2 (windows of 4 and 16 tokens). Layer 0 takes {0,1} {0,2} {0,1}
// {3,2} {0,1}; layer 1 {2,3} {2,0} {2,3} {1,0} {2,3}. Worked by hand: counts 4, 3,
// 2, 1 of 10; adjacent tokens share 1, 1, 0, 0 of 2; the last token's experts were
// both chosen in the 4 before it. Partners (the layer-1
// expert most often with a layer-0 one, ties to the lower id): 0 -> 2, 1 -> 2 (3 and 3),
// 2 -> 0, 3 -> 0 (1 and 1); layer 1's experts that are a partner of the token's
// layer-0 experts: 1, 2, 1, 1, 1 of 10.
TEST(RoutingProfile, measuredByHand) {
  const RoutingTrace t = traceOf(
      2, 16, 2, {{{0, 1}, {2, 3}}, {{0, 2}, {2, 0}}, {{0, 1}, {2, 3}}, {{3, 2}, {1, 0}}, {{0, 1}, {2, 3}}});
  const RoutingProfile p = measureRoutingProfile(t);
  ASSERT_EQ(p.layers.size(), 2u);
  EXPECT_EQ(p.n_expert, 16);
  EXPECT_EQ(p.k, 2);
  const std::vector<double> want_pop = {0.4, 0.3, 0.2, 0.1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_EQ(p.layers[0].popularity.size(), want_pop.size());
  for (size_t r = 0; r < want_pop.size(); ++r) EXPECT_DOUBLE_EQ(p.layers[0].popularity[r], want_pop[r]) << r;
  EXPECT_DOUBLE_EQ(p.layers[0].adjacent_overlap, 2.0 / 8.0);
  EXPECT_DOUBLE_EQ(p.layers[0].recent_reuse, 1.0);
  EXPECT_DOUBLE_EQ(p.layers[0].session_reuse, 0.0);  // no token has 16 before it
  EXPECT_DOUBLE_EQ(p.layers[0].layer_follow, 0.0);
  EXPECT_DOUBLE_EQ(p.layers[1].layer_follow, 6.0 / 10.0);
}

TEST(RoutingProfile, aSequenceStartDoesNotContinueTheOneBefore) {
  RoutingTrace t = traceOf(1, 4, 1, {{{0}}, {{0}}});
  const std::vector<uint16_t> ids = {0, 0};
  const std::vector<float> w = {1, 1};
  t.addSequence(ids, w);  // a second sequence of the same expert: its first token follows nothing
  EXPECT_DOUBLE_EQ(measureRoutingProfile(t).layers[0].adjacent_overlap, 1.0);  // 2 pairs, both shared
  const RoutingTrace one = traceOf(1, 4, 1, {{{0}}, {{1}}, {{1}}});
  EXPECT_DOUBLE_EQ(measureRoutingProfile(one).layers[0].adjacent_overlap, 0.5);
}

TEST(RoutingProfile, textRoundTripAndErrorsNameTheLine) {
  const RoutingTrace t = traceOf(
      2, 16, 2, {{{0, 1}, {2, 3}}, {{0, 2}, {2, 0}}, {{0, 1}, {2, 3}}, {{3, 2}, {1, 0}}, {{0, 1}, {2, 3}}});
  const RoutingProfile p = measureRoutingProfile(t);
  const RoutingProfile back = parseRoutingProfile(formatRoutingProfile(p));
  EXPECT_EQ(back.source, "by hand");
  ASSERT_EQ(back.layers.size(), 2u);
  EXPECT_NEAR(back.layers[1].layer_follow, 0.6, 1e-4);
  EXPECT_NEAR(back.layers[0].popularity[3], 0.1, 1e-5);

  const auto error = [](const std::string& text) {
    try {
      parseRoutingProfile(text);
    } catch (const RoutingTraceError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string head = "moechat routing profile 1\nsource x\nexperts 2 top 1 layers 1\n";
  EXPECT_EQ(error("a profile\n"), "routing profile, line 1: not a routing profile (version 1)");
  EXPECT_EQ(error(head), "routing profile, line 4: the profile ends early");
  EXPECT_EQ(error(head + "overlap 0.5 recent 0.5 session 0.5 follow 0 popularity 0.4 0.6\n"),
            "routing profile, line 4: popularity must be non-negative and non-increasing");
  EXPECT_EQ(error(head + "overlap 0.5 recent 0.5 session 0.5 follow 0 popularity 0.6 0.3\n"),
            "routing profile, line 4: the popularities sum to 0.900000, not 1");
  EXPECT_EQ(error(head + "overlap 1.5 recent 0.5 session 0.5 follow 0 popularity 0.6 0.4\n"),
            "routing profile, line 4: overlap, recent, session and follow are shares between 0 and 1");
  EXPECT_EQ(error("moechat routing profile 1\nsource x\nexperts 2 top 3 layers 1\n"),
            "routing profile, line 3: expected 'experts N top K layers L' with 1 <= K <= N <= 4096");
}

// The published figures for gpt-oss-20b's routing (the fingerprinting traces'
// write-ups, quoted in docs/offload.md): adjacent tokens share 43% of their experts,
// a layer's 8 most used experts take 41-62% of its selections.
TEST(RoutingProfile, theShippedProfileIsGptOss20bs) {
  const RoutingProfile& p = shippedRoutingProfile();
  EXPECT_EQ(p.n_expert, 32);
  EXPECT_EQ(p.k, 4);
  EXPECT_EQ(p.layers.size(), 24u);
  EXPECT_NEAR(meanOf(p, &LayerRoutingProfile::adjacent_overlap), 0.43, 0.02);
  const double top8 = topEightShare(p);
  EXPECT_GE(top8, 0.41);
  EXPECT_LE(top8, 0.62);
}

// gpt-oss-20b's shape drawn from the shipped profile: every token k distinct
// experts with weights summing to 1, the figures the process was fitted to within a
// few points, a demand cache that hits as on real routing (far above uniform
// routing, Belady above LRU).
TEST(RoutingProfile, synthesizedRoutingFollowsTheProfile) {
  const RoutingProfile& want = shippedRoutingProfile();
  const RoutingTrace t = synthesizeRouting(want, 24, 32, 4, 4096, 7);
  ASSERT_EQ(t.tokens(), 4096);
  ASSERT_EQ(t.n_layer, 24);
  for (int tok = 0; tok < t.tokens(); ++tok)
    for (int l = 0; l < t.n_layer; ++l) {
      const auto ids = t.idsAt(tok, l);
      const std::set<uint16_t> distinct(ids.begin(), ids.end());
      ASSERT_EQ(distinct.size(), 4u);
      ASSERT_LT(*distinct.rbegin(), 32);
      float sum = 0;
      for (const float w : t.weightsAt(tok, l)) sum += w;
      ASSERT_NEAR(sum, 1.0f, 1e-5f);
    }
  const RoutingProfile got = measureRoutingProfile(t);
  EXPECT_NEAR(meanOf(got, &LayerRoutingProfile::adjacent_overlap),
              meanOf(want, &LayerRoutingProfile::adjacent_overlap), 0.05);
  EXPECT_NEAR(meanOf(got, &LayerRoutingProfile::recent_reuse),
              meanOf(want, &LayerRoutingProfile::recent_reuse), 0.05);
  EXPECT_NEAR(meanOf(got, &LayerRoutingProfile::session_reuse),
              meanOf(want, &LayerRoutingProfile::session_reuse), 0.05);
  EXPECT_NEAR(topEightShare(got), topEightShare(want), 0.07);

  const auto real = decodeRequests(t), uniform = decodeRequests(uniformLike(t));
  const int half = 24 * 32 / 2;
  const double lru = simulateLru(real, 24, 32, half, LruScope::kPerLayer).hitRate();
  EXPECT_GT(lru, simulateLru(uniform, 24, 32, half, LruScope::kPerLayer).hitRate() + 0.2);
  EXPECT_GE(simulateBelady(real, 32, half).hitRate(), lru);
}

TEST(RoutingProfile, theSameRoutingForTheSameSeed) {
  const RoutingTrace t = synthesizeRouting(shippedRoutingProfile(), 3, 32, 4, 600, 7);
  EXPECT_TRUE(synthesizeRouting(shippedRoutingProfile(), 3, 32, 4, 600, 7).ids == t.ids);
  EXPECT_TRUE(synthesizeRouting(shippedRoutingProfile(), 3, 32, 4, 600, 8).ids != t.ids);
}

// Another routing shape (Qwen3-30B-A3B-like: 128 experts, top-8): the profile's
// layers and popularity curve resampled, the fitted figures still followed.
TEST(RoutingProfile, anyRoutingShape) {
  const RoutingProfile& want = shippedRoutingProfile();
  const RoutingTrace t = synthesizeRouting(want, 6, 128, 8, 1024, 1);
  ASSERT_EQ(t.n_expert, 128);
  ASSERT_EQ(t.k, 8);
  const RoutingProfile got = measureRoutingProfile(t);
  EXPECT_NEAR(meanOf(got, &LayerRoutingProfile::adjacent_overlap),
              meanOf(want, &LayerRoutingProfile::adjacent_overlap), 0.08);
  EXPECT_NEAR(meanOf(got, &LayerRoutingProfile::recent_reuse),
              meanOf(want, &LayerRoutingProfile::recent_reuse), 0.08);
  const auto real = decodeRequests(t), uniform = decodeRequests(uniformLike(t));
  const int half = 6 * 128 / 2;
  EXPECT_GT(simulateLru(real, 6, 128, half, LruScope::kPerLayer).hitRate(),
            simulateLru(uniform, 6, 128, half, LruScope::kPerLayer).hitRate() + 0.2);
  EXPECT_THROW(synthesizeRouting(want, 2, 4, 5, 10, 1), std::invalid_argument);
  EXPECT_THROW(synthesizeRouting(want, 0, 4, 2, 10, 1), std::invalid_argument);
}

namespace {

// The bench's simulated per-layer LRU hit rate on a run's gates ("lru_per_layer_simulated").
double lruOfBench(const std::string& json) {
  const std::string key = "\"lru_per_layer_simulated\"";
  const size_t at = json.find(key);
  const size_t rate = at == std::string::npos ? at : json.find("\"hit_rate\":", at);
  if (rate == std::string::npos) return -1;
  return std::stod(json.substr(rate + 11));
}

}  // namespace

// A synthetic file made with `gen-model --routing realistic` routes as the profile
// says wherever it runs (the bench here, without any flag): its gates hit a per-layer
// LRU cache of a quarter of the experts far more often than the same file's random router
// does; `bench --routing realistic` does the same for any file; another value of the
// key is refused by name.
TEST(RealisticRouting, aFileAsksForItAndEveryRunRoutesSo) {
  test::TempDir dir;
  const std::vector<std::string> shape = {"--arch",    "gpt-oss", "--layers",       "24",
                                          "--experts", "32",      "--experts-used", "4"};
  auto gen = [&](const std::string& file, std::vector<std::string> extra) {
    std::vector<std::string> argv = {MOECHAT_CLI, "gen-model", "-o", dir.file(file)};
    argv.insert(argv.end(), shape.begin(), shape.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    const auto r = test::runProgram(argv, 600);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  };
  gen("router.gguf", {});
  gen("realistic.gguf", {"--routing", "realistic"});
  auto bench = [&](const std::string& file, std::vector<std::string> extra) {
    std::vector<std::string> argv = {MOECHAT_CLI,
                                     "bench",
                                     dir.file(file),
                                     "--cache-share",
                                     "0.25",
                                     "--virtual-link",
                                     "--cpu-expert-ms",
                                     "0.5,2",
                                     "--prompt-tokens",
                                     "16",
                                     "--decode-tokens",
                                     "64",
                                     "--policies",
                                     "reactive-lru",
                                     "--json",
                                     "--threads",
                                     "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const auto r = test::runProgram(argv, 600);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.out;
  };
  const std::string router = bench("router.gguf", {}), realistic = bench("realistic.gguf", {});
  const std::string asked = bench("router.gguf", {"--routing", "realistic"});
  ASSERT_NE(realistic.find("realistic, as the file asks"), std::string::npos) << realistic;
  const double lru_router = lruOfBench(router), lru_realistic = lruOfBench(realistic);
  ASSERT_GE(lru_router, 0) << router;
  EXPECT_GT(lru_realistic, lru_router + 0.2) << "realistic " << lru_realistic << ", router " << lru_router;
  EXPECT_GT(lruOfBench(asked), lru_router + 0.2) << asked;

  auto w = synth::buildModel(synth::tinySpec("qwen3moe"));
  w.setString(synth::kRoutingKey, "sticky");
  w.writeFile(dir.file("unknown.gguf"));
  const auto refused =
      test::runProgram({MOECHAT_CLI, "bench", dir.file("unknown.gguf"), "--virtual-link"}, 600);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("moechat.routing is 'sticky'; the one routing moechat knows is 'realistic'"),
            std::string::npos)
      << refused.err;
}
