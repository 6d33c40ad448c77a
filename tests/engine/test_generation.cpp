// The generation loop over the embedded demo model: limits, determinism,
// prefix reuse across chat turns, stop strings, cancel, and bad prompts.
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <string>
#include <vector>

#include "app/core/engine_session.h"
#include "support/greedy_params.h"

using namespace moe;

namespace {

SessionOptions demo(int n_ctx = 256) {
  SessionOptions o;
  o.demo = true;
  o.n_ctx = n_ctx;
  o.threads = 2;
  return o;
}

using test::greedyToTheLimit;

std::vector<int32_t> prompt(EngineSession& s, const std::string& text) {
  const auto& tok = s.model().tokenizer();
  return tok.encode(text, tok.addBosDefault(), false);
}

}  // namespace

TEST(Generation, streamsExactlyMaxTokens) {
  EngineSession s(demo());
  ASSERT_TRUE(s.isDemo());
  int pieces = 0;
  const auto st = s.generator().generate(prompt(s, "Hello world"), greedyToTheLimit(20),
                                         [&](std::string_view) { ++pieces; });
  ASSERT_EQ(st.generated_tokens, 20);
  ASSERT_EQ(st.decode_steps, 19);  // the last sampled token is not fed back
  ASSERT_EQ(st.reason, StopReason::Length);
  ASSERT_TRUE(pieces > 0);
  ASSERT_TRUE(st.prefill_seconds > 0 && st.decode_seconds > 0);
  ASSERT_EQ(s.generator().cachedTokens().size(), prompt(s, "Hello world").size() + 19);
}

TEST(Generation, greedyIsDeterministicAndSeedsMatter) {
  auto run = [](uint64_t seed, float temp) {
    EngineSession s(demo());
    auto p = greedyToTheLimit(16);
    p.sampler.temperature = temp;
    p.sampler.seed = seed;
    std::string out;
    s.generator().generate(prompt(s, "The cache"), p, [&](std::string_view t) { out += t; });
    return out;
  };
  ASSERT_EQ(run(1, 0), run(2, 0));
  ASSERT_EQ(run(7, 1.0f), run(7, 1.0f));
  ASSERT_TRUE(run(7, 1.0f) != run(8, 1.0f));
}

TEST(Generation, secondTurnReusesPrefixAndMatchesFreshRun) {
  EngineSession chat(demo());
  std::string first;
  const auto p1 = prompt(chat, "one two three");
  chat.generator().generate(p1, greedyToTheLimit(6), [&](std::string_view t) { first += t; });
  // Turn two: the whole history plus more text, as a chat template renders it.
  const auto p2 = prompt(chat, "one two three four five six");
  std::string reused_out, fresh_out;
  const auto st =
      chat.generator().generate(p2, greedyToTheLimit(8), [&](std::string_view t) { reused_out += t; });
  ASSERT_TRUE(st.reused_tokens > 0);
  EngineSession fresh(demo());
  const auto st2 =
      fresh.generator().generate(p2, greedyToTheLimit(8), [&](std::string_view t) { fresh_out += t; });
  ASSERT_EQ(st2.reused_tokens, 0);
  ASSERT_EQ(reused_out, fresh_out);
}

TEST(Generation, stopStringEndsTheReply) {
  EngineSession s(demo());
  std::string free_text;
  s.generator().generate(prompt(s, "abc"), greedyToTheLimit(24), [&](std::string_view t) { free_text += t; });
  ASSERT_TRUE(free_text.size() > 4);
  // Stop on a piece of what the model will say: the reply ends before it.
  // (ASCII, so it cannot be part of a U+FFFD that stands for invalid bytes.)
  size_t at = free_text.size() / 2;
  while (at + 1 < free_text.size() &&
         !(std::isalnum((unsigned char)free_text[at]) && std::isalnum((unsigned char)free_text[at + 1])))
    ++at;
  ASSERT_TRUE(at + 1 < free_text.size());
  const std::string stop = free_text.substr(at, 2);
  s.generator().reset();
  auto p = greedyToTheLimit(24);
  p.stop_strings = {stop};
  std::string cut;
  const auto st = s.generator().generate(prompt(s, "abc"), p, [&](std::string_view t) { cut += t; });
  ASSERT_EQ(st.reason, StopReason::StopString);
  ASSERT_EQ(cut, free_text.substr(0, free_text.find(stop)));
}

TEST(Generation, cancelStops) {
  EngineSession s(demo());
  std::atomic<bool> cancel{false};
  int pieces = 0;
  const auto st = s.generator().generate(
      prompt(s, "abc"), greedyToTheLimit(50),
      [&](std::string_view) {
        if (++pieces == 3) cancel.store(true);
      },
      &cancel);
  ASSERT_EQ(st.reason, StopReason::Cancelled);
  ASSERT_TRUE(st.generated_tokens < 50);
}

// A model with recurrent layers (qwen35moe): a reply cancelled mid-way and then
// regenerated gives the uninterrupted reply's tokens, and the regenerate restores the
// prompt's state snapshot instead of running the prompt again.
TEST(Generation, recurrentModelRegeneratesAfterACancelledReply) {
  SessionOptions o;
  o.model_path = std::string(MOECHAT_TEST_DATA) + "/golden/qwen35moe.gguf";
  o.n_ctx = 128;
  o.threads = 2;
  const std::vector<int32_t> p = {1, 5, 9, 14, 2, 7, 30, 11};
  std::vector<int32_t> whole, again;
  {
    EngineSession s(o);
    s.generator().generate(p, greedyToTheLimit(12), [](std::string_view) {});
    whole = s.generator().cachedTokens();
  }
  EngineSession s(o);
  std::atomic<bool> cancel{false};
  int pieces = 0;
  const auto cut = s.generator().generate(
      p, greedyToTheLimit(12),
      [&](std::string_view) {
        if (++pieces == 4) cancel.store(true);
      },
      &cancel);
  ASSERT_EQ(cut.reason, StopReason::Cancelled);
  const auto st = s.generator().generate(p, greedyToTheLimit(12), [](std::string_view) {});
  ASSERT_EQ(st.reused_tokens, int(p.size()) - 1);    // all but the prompt's last token
  ASSERT_EQ(s.transformer().recomputedTokens(), 0);  // restored, not run again
  ASSERT_EQ(s.generator().cachedTokens(), whole);
}

TEST(Generation, badPrompts) {
  EngineSession s(demo(32));
  ASSERT_THROW(s.generator().generate({}, greedyToTheLimit(4), nullptr), std::invalid_argument);
  std::vector<int32_t> longp(40, 5);
  ASSERT_THROW(s.generator().generate(longp, greedyToTheLimit(4), nullptr), std::length_error);
  // A prompt that fits but leaves little room stops at the context, not past it.
  std::vector<int32_t> nearly(28, 5);
  const auto st = s.generator().generate(nearly, greedyToTheLimit(100), nullptr);
  ASSERT_EQ(st.reason, StopReason::ContextFull);
  ASSERT_EQ(s.transformer().nPast(), 32);
}
