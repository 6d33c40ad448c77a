// Recorded routing (offload/routing/): the fingerprinting JSON format and the
// compact file, the demand caches simulated on a trace (Belady, LRU), the replay
// that feeds a trace to a model's MoE layers, and `bench --routing-trace` on a
// model of gpt-oss-20b's routing shape with the shipped subset of real routing.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "inference/model.h"
#include "offload/history_predictor.h"
#include "offload/routing/demand_cache.h"
#include "offload/routing/json_cursor.h"
#include "offload/routing/routing_trace.h"
#include "offload/routing/trace_routing.h"
#include "support/run_program.h"
#include "support/temp_dir.h"
#include "synth/synthetic_model.h"

namespace {

using moe::DemandResult;
using moe::ExpertRequest;
using moe::RoutingTrace;
using moe::RoutingTraceError;

const std::string kShippedTrace = std::string(MOECHAT_TEST_DATA) + "/routing/gpt-oss-20b-mmlu-1k.mrt";

// A generation in the fingerprinting format: tokens x layers of (ids, probs).
std::string fingerprintJson(const std::vector<std::vector<std::vector<int>>>& ids, int first_token = 100) {
  std::string s = R"({"row_index": 7, "generated_only": ["<|channel|>", "x\"y"], "router_data": [)";
  for (size_t t = 0; t < ids.size(); ++t) {
    s += (t ? ", " : "") + std::string("{\"token_") + std::to_string(first_token + int(t)) + "\": {";
    for (size_t l = 0; l < ids[t].size(); ++l) {
      s += (l ? ", " : "") + std::string("\"layer_") + std::to_string(l) + "\": {\"selected_experts\": [";
      std::string probs;
      for (size_t j = 0; j < ids[t][l].size(); ++j) {
        s += (j ? ", " : "") + std::to_string(ids[t][l][j]);
        probs += (j ? ", " : "") + std::to_string(0.5 / double(j + 1));
      }
      s += "], \"selected_probs\": [" + probs + "]}";
    }
    s += "}}";
  }
  return s + "], \"finished_successfully\": true}";
}

void writeFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Uniform routing of t's shape and length: k distinct experts per token and layer.
RoutingTrace uniformLike(const RoutingTrace& t) {
  RoutingTrace u;
  u.n_layer = t.n_layer, u.n_expert = t.n_expert, u.k = t.k, u.source = "uniform";
  std::vector<uint16_t> ids;
  uint32_t x = 12345;
  for (int i = 0; i < t.tokens() * t.n_layer; ++i) {
    std::vector<uint16_t> pick;
    while (int(pick.size()) < t.k) {
      x = x * 1664525u + 1013904223u;
      const uint16_t e = uint16_t((x >> 8) % uint32_t(t.n_expert));
      if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
    }
    ids.insert(ids.end(), pick.begin(), pick.end());
  }
  u.addSequence(ids, std::vector<float>(ids.size(), 1.0f / float(t.k)));
  return u;
}

TEST(RoutingTrace, readsTheFingerprintFormat) {
  const RoutingTrace t =
      moe::parseFingerprintJson(fingerprintJson({{{3, 1}, {0, 7}}, {{2, 3}, {7, 6}}}), "gen.json");
  ASSERT_EQ(t.tokens(), 2);
  ASSERT_EQ(t.sequences(), 1);
  ASSERT_EQ(t.n_layer, 2);
  ASSERT_EQ(t.k, 2);
  ASSERT_EQ(t.n_expert, 8);  // the largest id + 1: the format does not say
  ASSERT_FALSE(t.n_expert_exact);
  ASSERT_EQ(std::vector<uint16_t>(t.idsAt(1, 1).begin(), t.idsAt(1, 1).end()), (std::vector<uint16_t>{7, 6}));
  ASSERT_EQ(t.weightsAt(0, 0)[1], 0.25f);
  ASSERT_EQ(t.shape(), "2 layers x at least 8 experts, top-2");
}

TEST(RoutingTrace, malformedJsonIsAClearError) {
  const auto parse = [](const std::string& text) {
    return errorOf([&] { moe::parseFingerprintJson(text, "bad.json"); });
  };
  ASSERT_NE(parse(R"({"router_data": [{"token_1": {"layer_0": {"selected_experts": [1,)")
                .find("bad.json: JSON error at byte"),
            std::string::npos);
  ASSERT_NE(parse(R"({"row_index": 1})").find("no \"router_data\""), std::string::npos);
  // A token missing a layer, a layer with another k, a negative id.
  const std::string two_layers = fingerprintJson({{{1, 2}, {3, 4}}});
  ASSERT_NE(parse(fingerprintJson({{{1, 2}, {3, 4}}, {{1, 2}}})).find("token_101 has 1 layers"),
            std::string::npos);
  ASSERT_NE(parse(fingerprintJson({{{1, 2}, {3, 4}}, {{1, 2}, {3}}})).find("gives 1 experts"),
            std::string::npos);
  ASSERT_NE(parse(fingerprintJson({{{1, -2}}})).find("expert id -2"), std::string::npos);
  ASSERT_EQ(parse(two_layers), "");
  // Deep nesting is refused, not a stack overflow.
  ASSERT_NE(parse("{\"x\": " + std::string(100000, '[') + "}").find("nested too deeply"), std::string::npos);
}

TEST(RoutingTrace, compactFileKeepsIdsAndWeights) {
  moe::test::TempDir dir;
  RoutingTrace t = moe::parseFingerprintJson(fingerprintJson({{{3, 1}, {0, 7}}, {{2, 3}, {7, 6}}}), "a");
  t.addSequence(std::vector<uint16_t>{5, 4, 3, 2}, std::vector<float>{0.75f, 0.25f, 0.5f, 0.5f});
  t.n_expert = 8;
  t.n_expert_exact = true;
  t.source = "unit test";
  moe::saveRoutingTrace(t, dir.file("t.mrt"));
  const RoutingTrace back = moe::loadRoutingTrace(dir.file("t.mrt"));
  ASSERT_EQ(back.sequence_start, t.sequence_start);
  ASSERT_EQ(back.ids, t.ids);
  ASSERT_EQ(back.weights, t.weights);  // these weights are exact in bf16
  ASSERT_EQ(back.shape(), "2 layers x 8 experts, top-2");
  ASSERT_EQ(back.source, "unit test");

  // Cut short, or not a trace: the error names the file and what is wrong.
  std::ifstream in(dir.file("t.mrt"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  writeFile(dir.file("cut.mrt"), bytes.substr(0, bytes.size() - 3));
  const std::string cut = errorOf([&] { moe::loadRoutingTrace(dir.file("cut.mrt")); });
  ASSERT_NE(cut.find("cut.mrt"), std::string::npos) << cut;
  ASSERT_NE(cut.find("claims 1 tokens, more than the file"), std::string::npos) << cut;
  writeFile(dir.file("other.bin"), "GGUF and more");
  ASSERT_NE(errorOf([&] { moe::loadRoutingTrace(dir.file("other.bin")); }).find("not a routing trace"),
            std::string::npos);
  ASSERT_NE(errorOf([&] { moe::loadRoutingTrace(dir.file("missing.mrt")); }).find("no such file"),
            std::string::npos);
}

TEST(RoutingTrace, aFolderIsItsExampleFilesInPathOrder) {
  moe::test::TempDir dir;
  writeFile(dir.file("mmlu_b/topic/True_False_examples.json"), fingerprintJson({{{1, 2}}, {{2, 3}}}));
  writeFile(dir.file("mmlu_a/topic/False_False_examples.json"), fingerprintJson({{{0, 5}}}));
  writeFile(dir.file("mmlu_a/topic/False_False.json"), R"({"sample_count": 1})");  // analytics: not a trace
  const RoutingTrace t = moe::loadRoutingTrace(dir.path().string());
  ASSERT_EQ(t.sequences(), 2);
  ASSERT_EQ(t.tokens(), 3);
  ASSERT_EQ(t.sequence_start, (std::vector<uint32_t>{0, 1, 3}));
  ASSERT_EQ(t.idsAt(0, 0)[1], 5);  // mmlu_a first
  ASSERT_EQ(t.n_expert, 6);
  writeFile(dir.file("mmlu_c/x/A_examples.json"), fingerprintJson({{{1, 2, 3}}}));
  ASSERT_NE(
      errorOf([&] { moe::loadRoutingTrace(dir.path().string()); }).find("top-3, unlike the files before"),
      std::string::npos);
}

TEST(RoutingTrace, truncateKeepsWholeTokens) {
  RoutingTrace t;
  t.n_layer = 1, t.n_expert = 4, t.k = 1;
  t.addSequence(std::vector<uint16_t>{0, 1, 2}, std::vector<float>(3, 1.0f));
  t.addSequence(std::vector<uint16_t>{3, 2}, std::vector<float>(2, 1.0f));
  t.truncate(4);
  ASSERT_EQ(t.sequence_start, (std::vector<uint32_t>{0, 3, 4}));
  t.truncate(2);
  ASSERT_EQ(t.sequence_start, (std::vector<uint32_t>{0, 2}));
  ASSERT_EQ(t.ids, (std::vector<uint16_t>{0, 1}));
}

// Hand-worked: one layer, two slots, experts A B C A B. LRU evicts each expert just
// before it comes back (no hit); Belady keeps A and B and lets C pass (2 hits).
TEST(DemandCache, beladyAndLruByHand) {
  std::vector<ExpertRequest> r;
  for (int e : {0, 1, 2, 0, 1}) r.push_back({0, {e}});
  ASSERT_EQ(moe::simulateLru(r, 1, 3, 2, moe::LruScope::kShared).hits, 0u);
  const DemandResult b = moe::simulateBelady(r, 3, 2);
  ASSERT_EQ(b.uses, 5u);
  ASSERT_EQ(b.hits, 2u);
  // A gate's experts are needed together: with 2 slots, the gate {A, B} after {C}
  // may not evict A to load B.
  const std::vector<ExpertRequest> together = {{0, {2}}, {0, {0, 1}}, {0, {0, 1}}};
  ASSERT_EQ(moe::simulateBelady(together, 3, 2).hits, 2u);
  ASSERT_EQ(moe::simulateLru(together, 1, 3, 2, moe::LruScope::kShared).hits, 2u);
  // Per layer: each of 2 layers owns 1 of 2 slots.
  const std::vector<ExpertRequest> two = {{0, {0}}, {0, {1}}, {1, {0}}, {0, {1}}, {1, {0}}};
  ASSERT_EQ(moe::simulateLru(two, 2, 2, 2, moe::LruScope::kPerLayer).hits, 2u);
  ASSERT_EQ(moe::simulateLru(two, 2, 2, 2, moe::LruScope::kShared).hits, 2u);
}

// On the shipped gpt-oss-20b routing: Belady is at least every LRU at every budget,
// and LRU hits far more than on uniform routing of the same shape (real routing is
// sticky: adjacent tokens share experts).
TEST(DemandCache, realRoutingBeatsUniformAndBeladyBoundsLru) {
  const RoutingTrace t = moe::loadRoutingTrace(kShippedTrace);
  ASSERT_EQ(t.shape(), "24 layers x 32 experts, top-4");
  ASSERT_EQ(t.tokens(), 1024);
  const RoutingTrace uniform = uniformLike(t);
  const auto real = moe::decodeRequests(t), uni = moe::decodeRequests(uniform);
  for (double share : {0.25, 0.5, 0.75}) {
    const int slots = int(share * t.n_layer * t.n_expert);
    const DemandResult belady = moe::simulateBelady(real, t.n_expert, slots);
    const DemandResult lru_layer =
        moe::simulateLru(real, t.n_layer, t.n_expert, slots, moe::LruScope::kPerLayer);
    const DemandResult lru = moe::simulateLru(real, t.n_layer, t.n_expert, slots, moe::LruScope::kShared);
    const DemandResult uni_lru =
        moe::simulateLru(uni, t.n_layer, t.n_expert, slots, moe::LruScope::kPerLayer);
    ASSERT_GE(belady.hits, lru_layer.hits) << share;
    ASSERT_GE(belady.hits, lru.hits) << share;
    ASSERT_GT(lru_layer.hitRate(), uni_lru.hitRate() + 0.1) << share;
    ASSERT_GE(moe::simulateBelady(uni, t.n_expert, slots).hits, uni_lru.hits) << share;
    // The offload path's own slot table: no rule beats Belady, and evicting the expert
    // asked for least (shared-frequency, the default of every policy but
    // reactive-lru) hits more than its per-layer LRU where the cache is tight.
    std::map<moe::Eviction, DemandResult> table;
    for (moe::Eviction e : {moe::Eviction::kLayerLru, moe::Eviction::kSharedLru,
                            moe::Eviction::kLayerFrequency, moe::Eviction::kSharedFrequency}) {
      table[e] = moe::simulateSlotTable(real, t.n_layer, slots, e);
      ASSERT_EQ(table[e].uses, belady.uses);
      ASSERT_GE(belady.hits, table[e].hits) << share << " " << moe::evictionName(e);
    }
    if (share < 0.7) {
      ASSERT_GT(table[moe::Eviction::kSharedFrequency].hitRate(),
                table[moe::Eviction::kLayerLru].hitRate() + 0.01)
          << share;
    }
  }
}

// Layer 1 follows layer 0 (expert a, then 3 - a) and the next token's layer 0 takes
// layer 1's expert: the predictor learns both, across the token boundary too, and
// says how sure it is (its probabilities measured on the gates it saw).
TEST(HistoryPredictor, learnsLayerToLayerAndTokenToToken) {
  moe::HistoryPredictor p(2, 4);
  auto gate = [&](int layer, int expert) {
    const int ids[1] = {expert};
    const float w[1] = {1.0f};
    p.observe({layer, 1, std::span<const int>(ids, 1), std::span<const float>(w, 1)});
  };
  int a = 0;
  for (int token = 0; token < 64; ++token) {
    gate(0, a);
    gate(1, 3 - a);
    a = 3 - a;
  }
  gate(0, a);
  ASSERT_EQ(p.predict(1, 1, {}, 1, 1), (std::vector<int>{3 - a}));
  gate(1, 3 - a);
  ASSERT_TRUE(p.predictsNextToken());
  const auto next = p.predictScored(0, 0, {}, 1, 4);  // the next token's layer 0
  ASSERT_EQ(next.size(), 4u);
  ASSERT_EQ(next[0].expert, 3 - a);
  ASSERT_GT(next[0].probability, 0.8f);
  for (size_t i = 1; i < next.size(); ++i) ASSERT_LT(next[i].probability, 0.2f) << next[i].expert;
}

moe::ModelConfig routingConfig(int n_layer, int n_expert, int k, int leading_dense = 0) {
  moe::ModelConfig c;
  c.n_layer = n_layer;
  c.n_expert = n_expert;
  c.n_expert_used = k;
  c.n_leading_dense = leading_dense;
  return c;
}

TEST(TraceRouting, replaysByPositionAndRefusesAnotherShape) {
  RoutingTrace t;
  t.n_layer = 2, t.n_expert = 4, t.k = 1, t.source = "t";
  t.addSequence(std::vector<uint16_t>{0, 1, 2, 3, 1, 0}, std::vector<float>{1, 2, 3, 4, 5, 6});
  // One leading dense layer: model layers 1 and 2 are the trace's 0 and 1.
  const moe::TraceRouting replay(t, routingConfig(3, 4, 1, 1), /*start_token=*/1);
  std::vector<int> ids(3);
  std::vector<float> w(3);
  replay.route(2, /*first_pos=*/0, 3, ids, w);  // tokens 1, 2, 0 (the trace repeats)
  ASSERT_EQ(ids, (std::vector<int>{3, 0, 1}));
  ASSERT_EQ(w, (std::vector<float>{4, 6, 2}));
  ASSERT_THROW(replay.route(0, 0, 1, ids, w), std::invalid_argument);  // the dense layer

  const std::string wrong = errorOf([&] { (void)moe::TraceRouting(t, routingConfig(2, 8, 2)); });
  ASSERT_NE(
      wrong.find("(2 layers x 4 experts, top-1) does not fit the model (2 MoE layers x 8 experts, top-2)"),
      std::string::npos)
      << wrong;
  t.n_expert_exact = false;  // "at least 4": a model of 8 experts may replay it
  ASSERT_NO_THROW((void)moe::TraceRouting(t, routingConfig(2, 8, 1)));
}

// A value at a path of a JSON object ("policies" rows are looked up by name).
struct BenchJson {
  std::map<std::string, double> top;                          // numbers at the top level and in objects
  std::map<std::string, std::map<std::string, double>> rows;  // policy -> its numbers
};

BenchJson parseBench(const std::string& text) {
  BenchJson out;
  moe::JsonCursor c(text);
  c.forEachMember([&](const std::string& key) {
    if (key == "policies") {
      c.forEachElement([&] {
        std::map<std::string, double> row;
        std::string name;
        c.forEachMember([&](const std::string& k) {
          if (k == "policy")
            name = c.readString();
          else if (c.peek() == '-' || (c.peek() >= '0' && c.peek() <= '9'))
            row[k] = c.readNumber();
          else
            c.skipValue();
        });
        out.rows[name] = row;
      });
    } else if (c.peek() == '{') {
      c.forEachMember([&](const std::string& k) {
        if (c.peek() == '-' || (c.peek() >= '0' && c.peek() <= '9'))
          out.top[key + "." + k] = c.readNumber();
        else
          c.skipValue();
      });
    } else if (c.peek() == '-' || (c.peek() >= '0' && c.peek() <= '9')) {
      out.top[key] = c.readNumber();
    } else {
      c.skipValue();
    }
  });
  return out;
}

// The bench on a tiny model of gpt-oss-20b's routing shape (24 layers, 32 experts,
// top-4), its MoE layers computing the shipped trace's real choices: the gates ask
// for exactly the trace's experts (the prompt as one batch, then token by token),
// Belady's demand cache hits at least as often as each demand policy, and plain LRU
// hits far more often than on uniform routing replayed the same way.
TEST(BenchReplay, realRoutingThroughTheEngine) {
  moe::test::TempDir dir;
  auto spec = moe::synth::tinySpec("gpt-oss");
  spec.n_layer = 24, spec.n_expert = 32, spec.n_expert_used = 4;
  moe::synth::writeModel(spec, dir.file("oss24.gguf"));
  const RoutingTrace real = moe::loadRoutingTrace(kShippedTrace);
  moe::saveRoutingTrace(uniformLike(real), dir.file("uniform.mrt"));
  const int prompt = 32, decode = 48;
  const std::vector<std::string> common = {MOECHAT_CLI,
                                           "bench",
                                           dir.file("oss24.gguf"),
                                           "--cache-share",
                                           "0.25",
                                           "--virtual-link",
                                           "--cpu-expert-ms",
                                           "0.5,2",
                                           "--prompt-tokens",
                                           std::to_string(prompt),
                                           "--decode-tokens",
                                           std::to_string(decode),
                                           "--json",
                                           "--threads",
                                           "1"};
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = common;
    argv.insert(argv.end(), extra.begin(), extra.end());
    const auto r = moe::test::runProgram(argv, 600);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return parseBench(r.out);
  };
  const BenchJson replayed =
      run({"--routing-trace", kShippedTrace, "--policies", "reactive-lru,static,cpu-experts"});
  const BenchJson uniform = run({"--routing-trace", dir.file("uniform.mrt"), "--policies", "reactive-lru"});
  ASSERT_TRUE(replayed.top.count("belady.hit_rate") && replayed.rows.count("reactive-lru"));

  // The gates the trace makes: per layer the prompt's distinct experts, then each decode token's.
  std::vector<ExpertRequest> gates;
  for (int l = 0; l < real.n_layer; ++l) {
    ExpertRequest r{l, {}};
    for (int t = 0; t < prompt; ++t)
      for (uint16_t e : real.idsAt(t, l))
        if (std::find(r.experts.begin(), r.experts.end(), e) == r.experts.end()) r.experts.push_back(e);
    gates.push_back(r);
  }
  // The last decode token is sampled, never run: decode - 1 steps after the prompt.
  for (int t = prompt; t < prompt + decode - 1; ++t)
    for (int l = 0; l < real.n_layer; ++l) {
      ExpertRequest r{l, {}};
      for (uint16_t e : real.idsAt(t, l)) r.experts.push_back(e);
      gates.push_back(r);
    }
  const int slots = int(replayed.top.at("cache_slots"));
  const DemandResult want = moe::simulateBelady(gates, real.n_expert, slots);
  ASSERT_EQ(replayed.top.at("belady.uses"), double(want.uses));
  ASSERT_EQ(replayed.top.at("belady.hits"), double(want.hits));

  const double belady = replayed.top.at("belady.hit_rate");
  // In the cache at the gate: ready, or its copy in flight (which of the two depends on the copy thread).
  auto inCache = [](const std::map<std::string, double>& row) {
    return (row.at("ready_hits") + row.at("inflight_hits")) / row.at("expert_uses");
  };
  for (const auto& [name, row] : replayed.rows) {
    ASSERT_EQ(row.at("expert_uses"), double(want.uses)) << name;
    ASSERT_LE(inCache(row), belady + 1e-9) << name << " hits more often than the clairvoyant optimum";
  }
  ASSERT_GE(replayed.top.at("belady.hits"), replayed.top.at("lru_per_layer_simulated.hits"));
  ASSERT_GT(inCache(replayed.rows.at("reactive-lru")), inCache(uniform.rows.at("reactive-lru")) + 0.2);

  // Prefetching predicted from routing history (layer to layer, token to token, learned
  // as it runs) names the experts the gates then choose far more often than skip-gate,
  // which applies this random model's routers while the trace decides.
  // Under replay proactive predicts from routing history by default.
  const BenchJson predicted =
      run({"--routing-trace", kShippedTrace, "--policies", "proactive", "--skip-gate"});
  ASSERT_TRUE(predicted.rows.count("proactive") && predicted.rows.count("proactive-skip-gate"));
  const double history = predicted.rows.at("proactive").at("accuracy");
  const double skip_gate = predicted.rows.at("proactive-skip-gate").at("accuracy");
  ASSERT_GT(history, skip_gate + 0.2) << "history " << history << ", skip-gate " << skip_gate;

  // A trace of another shape is refused, both shapes named.
  spec.n_expert = 16;
  moe::synth::writeModel(spec, dir.file("oss16.gguf"));
  const auto refused = moe::test::runProgram(
      {MOECHAT_CLI, "bench", dir.file("oss16.gguf"), "--routing-trace", kShippedTrace, "--virtual-link"},
      600);
  ASSERT_EQ(refused.exit_code, 1);
  ASSERT_NE(
      refused.err.find("(24 layers x 32 experts, top-4) does not fit the model (24 MoE layers x 16 experts, "
                       "top-4)"),
      std::string::npos)
      << refused.err;
}

}  // namespace
