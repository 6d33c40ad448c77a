// The generation loop over the embedded demo model: limits, determinism,
// prefix reuse across chat turns, stop strings, cancel, and bad prompts.
#include <QtTest>

#include <atomic>

#include "app/core/engine_session.h"

using namespace moe;

namespace {

SessionOptions demo(int n_ctx = 256) {
  SessionOptions o;
  o.demo = true;
  o.n_ctx = n_ctx;
  o.threads = 2;
  return o;
}

GenerationParams greedy(int n) {
  GenerationParams p;
  p.max_tokens = n;
  p.sampler.temperature = 0;
  p.stop_at_end_token = false;
  return p;
}

std::vector<int32_t> prompt(EngineSession& s, const std::string& text) {
  const auto& tok = s.model().tokenizer();
  return tok.encode(text, tok.addBosDefault(), false);
}

}  // namespace

class GenerationTest : public QObject {
  Q_OBJECT
 private slots:
  void streamsExactlyMaxTokens() {
    EngineSession s(demo());
    QVERIFY(s.isDemo());
    int pieces = 0;
    const auto st =
        s.generator().generate(prompt(s, "Hello world"), greedy(20), [&](std::string_view) { ++pieces; });
    QCOMPARE(st.generated_tokens, 20);
    QCOMPARE(st.decode_steps, 19);  // the last sampled token is not fed back
    QCOMPARE(st.reason, StopReason::Length);
    QVERIFY(pieces > 0);
    QVERIFY(st.prefill_seconds > 0 && st.decode_seconds > 0);
    QCOMPARE(s.generator().cachedTokens().size(), prompt(s, "Hello world").size() + 19);
  }

  void greedyIsDeterministicAndSeedsMatter() {
    auto run = [](uint64_t seed, float temp) {
      EngineSession s(demo());
      auto p = greedy(16);
      p.sampler.temperature = temp;
      p.sampler.seed = seed;
      std::string out;
      s.generator().generate(prompt(s, "The cache"), p, [&](std::string_view t) { out += t; });
      return out;
    };
    QCOMPARE(run(1, 0), run(2, 0));
    QCOMPARE(run(7, 1.0f), run(7, 1.0f));
    QVERIFY(run(7, 1.0f) != run(8, 1.0f));
  }

  void secondTurnReusesPrefixAndMatchesFreshRun() {
    EngineSession chat(demo());
    std::string first;
    const auto p1 = prompt(chat, "one two three");
    chat.generator().generate(p1, greedy(6), [&](std::string_view t) { first += t; });
    // Turn two: the whole history plus more text, as a chat template renders it.
    const auto p2 = prompt(chat, "one two three four five six");
    std::string reused_out, fresh_out;
    const auto st = chat.generator().generate(p2, greedy(8), [&](std::string_view t) { reused_out += t; });
    QVERIFY(st.reused_tokens > 0);
    EngineSession fresh(demo());
    const auto st2 = fresh.generator().generate(p2, greedy(8), [&](std::string_view t) { fresh_out += t; });
    QCOMPARE(st2.reused_tokens, 0);
    QCOMPARE(reused_out, fresh_out);
  }

  void stopStringEndsTheReply() {
    EngineSession s(demo());
    std::string free_text;
    s.generator().generate(prompt(s, "abc"), greedy(24), [&](std::string_view t) { free_text += t; });
    QVERIFY(free_text.size() > 4);
    // Stop on a piece of what the model will say: the reply ends before it.
    // (ASCII, so it cannot be part of a U+FFFD that stands for invalid bytes.)
    size_t at = free_text.size() / 2;
    while (at + 1 < free_text.size() &&
           !(std::isalnum((unsigned char)free_text[at]) && std::isalnum((unsigned char)free_text[at + 1])))
      ++at;
    QVERIFY(at + 1 < free_text.size());
    const std::string stop = free_text.substr(at, 2);
    s.generator().reset();
    auto p = greedy(24);
    p.stop_strings = {stop};
    std::string cut;
    const auto st = s.generator().generate(prompt(s, "abc"), p, [&](std::string_view t) { cut += t; });
    QCOMPARE(st.reason, StopReason::StopString);
    QCOMPARE(cut, free_text.substr(0, free_text.find(stop)));
  }

  void cancelStops() {
    EngineSession s(demo());
    std::atomic<bool> cancel{false};
    int pieces = 0;
    const auto st = s.generator().generate(
        prompt(s, "abc"), greedy(50),
        [&](std::string_view) {
          if (++pieces == 3) cancel.store(true);
        },
        &cancel);
    QCOMPARE(st.reason, StopReason::Cancelled);
    QVERIFY(st.generated_tokens < 50);
  }

  void badPrompts() {
    EngineSession s(demo(32));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, s.generator().generate({}, greedy(4), nullptr));
    std::vector<int32_t> longp(40, 5);
    QVERIFY_THROWS_EXCEPTION(std::length_error, s.generator().generate(longp, greedy(4), nullptr));
    // A prompt that fits but leaves little room stops at the context, not past it.
    std::vector<int32_t> nearly(28, 5);
    const auto st = s.generator().generate(nearly, greedy(100), nullptr);
    QCOMPARE(st.reason, StopReason::ContextFull);
    QCOMPARE(s.transformer().nPast(), 32);
  }
};

QTEST_APPLESS_MAIN(GenerationTest)
#include "test_generation.moc"
