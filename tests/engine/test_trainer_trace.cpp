// Trace files (offload/trainer/trace_file.h): what collection writes reads back
// (f16 hidden states, the gate's experts and weights, token ids), a killed run
// resumes to the same bytes a single run writes, a cancelled run leaves a usable
// file, and a trace of another model or a damaged file is refused clearly.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "models/sha256.h"
#include "offload/trainer/trace_collector.h"
#include "quant/quant.h"
#include "support/engine_fixture.h"
#include "support/temp_dir.h"

using namespace moe;

namespace {

std::vector<std::string> somePrompts(int n) {
  auto all = builtinPrompts();
  all.resize(n);
  return all;
}

std::vector<uint8_t> fileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

synth::SyntheticSpec spec() {
  auto s = synth::tinySpec("qwen3moe");
  s.n_layer = 4;
  return s;
}

TraceRunResult trace(EngineFixture& f, const std::string& path, const std::vector<std::string>& prompts,
                     int new_tokens = 3, const std::atomic<bool>* cancel = nullptr,
                     const std::function<void(const TraceProgress&)>& progress = {}) {
  TraceWriter w(path, traceHeaderFor(*f.model, std::string(64, 'a'), "test"));
  TraceOptions o;
  o.max_new_tokens = new_tokens;
  return collectTraces(*f.model, *f.backend, *f.experts, prompts, w, o, progress, cancel);
}

}  // namespace

TEST(TrainerTrace, sha256KnownAnswers) {  // FIPS 180-4 examples
  ASSERT_EQ(sha256Hex({}), std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
  const std::string abc = "abc";
  ASSERT_EQ(sha256Hex({reinterpret_cast<const uint8_t*>(abc.data()), abc.size()}),
            std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  const std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";  // two blocks
  Sha256 h;                                                                            // fed in uneven pieces
  for (size_t i = 0; i < two.size(); i += 7)
    h.update({reinterpret_cast<const uint8_t*>(two.data()) + i, std::min<size_t>(7, two.size() - i)});
  ASSERT_EQ(h.hexDigest(), std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
}

TEST(TrainerTrace, builtinPromptSet) {
  const auto p = builtinPrompts();
  ASSERT_TRUE(p.size() >= 60 && p.size() <= 120) << p.size();
  for (const auto& s : p) ASSERT_TRUE(!s.empty());
  ASSERT_EQ(parsePromptLines("a\\nb\r\n\n  \nc").size(), size_t(2));
  ASSERT_EQ(parsePromptLines("a\\nb\r\n\n  \nc")[0], std::string("a\nb"));
}

TEST(TrainerTrace, roundTripMatchesTheForwardPass) {
  moe::test::TempDir dir;
  EngineFixture f(spec());
  const auto& c = f.model->config();
  const std::string path = dir.file("t.moetrace");
  const auto prompts = somePrompts(3);
  const auto r = trace(f, path, prompts, 4);
  ASSERT_EQ(r.prompts_traced, 3);

  const TraceReader reader(path);
  ASSERT_EQ(reader.header().n_layer, c.n_layer);
  ASSERT_EQ(reader.header().k, c.n_expert_used);
  ASSERT_EQ(int(reader.header().moe_layers.size()), c.n_layer);
  ASSERT_EQ(reader.prompts(), (std::vector<int>{0, 1, 2}));
  ASSERT_EQ(int64_t(reader.totalTokens()), r.tokens);

  // The same prompt run again by hand: layer inputs and choices agree.
  for (int p = 0; p < 3; ++p) {
    std::map<int, std::vector<float>> inputs;
    std::map<int, std::vector<int>> chosen;
    struct Rec : ExpertSource {
      ResidentExpertSource inner;
      std::map<int, std::vector<float>>* in;
      explicit Rec(const std::vector<std::vector<ExpertWeights>>& t) : inner(t) {}
      void onLayerInput(int l, std::span<const float> h, int) override {
        (*in)[l].insert((*in)[l].end(), h.begin(), h.end());
      }
      std::vector<ExpertRef> acquire(int l, std::span<const int> e) override { return inner.acquire(l, e); }
      void release(int l) override { inner.release(l); }
    } rec(f.model->hostExperts());
    rec.in = &inputs;
    auto t = f.transformer(512, &rec);
    t->setRoutingObserver([&](const RoutingEvent& ev) {
      chosen[ev.layer].insert(chosen[ev.layer].end(), ev.experts.begin(), ev.experts.end());
    });
    const auto rows0 = reader.read(p, 0);
    std::vector<float> logits;
    t->forward(rows0.tokens, logits);  // prompt and generated tokens in one batch: same results
    for (int l = 0; l < c.n_layer; ++l) {
      const auto rows = reader.read(p, l);
      ASSERT_EQ(rows.tokens, rows0.tokens);
      ASSERT_EQ(rows.experts.size(), chosen[l].size());
      // Generated tokens ran one by one, so sums may differ in the last bits: compare
      // the hidden states to f16 precision and the choices exactly where no tie is near.
      for (size_t i = 0; i < rows.hidden.size(); ++i)
        ASSERT_TRUE(std::abs(rows.hidden[i] - inputs[l][i]) <= 2e-3f * (1 + std::abs(inputs[l][i])));
      int same = 0;
      for (size_t i = 0; i < rows.experts.size(); ++i) same += rows.experts[i] == chosen[l][i];
      ASSERT_TRUE(same >= int(rows.experts.size()) * 95 / 100);
      for (float w : rows.weights) ASSERT_TRUE(w > 0 && w <= 1.0001f);
    }
  }
  ASSERT_THROW(reader.read(7, 0), std::invalid_argument);
}

TEST(TrainerTrace, resumeGivesTheSameBytes) {
  moe::test::TempDir dir;
  EngineFixture f(spec());
  const std::string whole = dir.file("whole"), part = dir.file("part");
  const auto prompts = somePrompts(5);
  trace(f, whole, prompts);
  trace(f, part, somePrompts(3));
  {  // a run killed half-way through prompt 3: a batch on disk without its end marker
    TraceWriter w(part, traceHeaderFor(*f.model, std::string(64, 'a'), "test"));
    const int32_t tokens[2] = {5, 6};
    w.beginBatch(3, 0, tokens);
    std::vector<float> h(2 * f.model->config().n_embd, 0.5f);
    std::vector<int> e(2 * f.model->config().n_expert_used, 1);
    std::vector<float> wt(e.size(), 0.25f);
    w.addLayer(0, h, e, wt);
  }
  ASSERT_EQ(TraceReader(part).prompts(), (std::vector<int>{0, 1, 2}));  // the torn prompt is not seen
  int progress_calls = 0;
  const auto r = trace(f, part, prompts, 3, nullptr, [&](const TraceProgress& p) {
    ++progress_calls;
    ASSERT_EQ(p.prompts_total, 5);
    ASSERT_TRUE(p.eta_seconds >= 0);
  });
  ASSERT_EQ(r.prompts_skipped, 3);
  ASSERT_EQ(r.prompts_traced, 2);
  ASSERT_EQ(progress_calls, 2);
  ASSERT_TRUE(fileBytes(part) == fileBytes(whole));
}

TEST(TrainerTrace, cancelStopsBetweenPrompts) {
  moe::test::TempDir dir;
  EngineFixture f(spec());
  const std::string path = dir.file("c");
  std::atomic<bool> cancel{false};
  const auto r = trace(f, path, somePrompts(6), 2, &cancel, [&](const TraceProgress& p) {
    if (p.prompts_done == 2) cancel = true;
  });
  ASSERT_TRUE(r.cancelled);
  ASSERT_EQ(TraceReader(path).prompts(), (std::vector<int>{0, 1}));
}

TEST(TrainerTrace, refusesAnotherModelAndDamage) {
  moe::test::TempDir dir;
  EngineFixture f(spec());
  const std::string path = dir.file("t");
  trace(f, path, somePrompts(2));
  // Appending traces of another model to it is refused, and the file is kept.
  const auto before = fileBytes(path);
  try {
    TraceWriter w(path, traceHeaderFor(*f.model, std::string(64, 'b'), "other"));
    FAIL() << "another model's header was accepted";
  } catch (const TraceFormatError& e) {
    ASSERT_TRUE(std::string(e.what()).find("another model") != std::string::npos);
  }
  ASSERT_TRUE(fileBytes(path) == before);
  // Garbage, and a header with an impossible shape.
  const std::string junk = dir.file("junk");
  std::ofstream(junk) << "hello, not a trace";
  ASSERT_THROW(TraceReader{junk}, TraceFormatError);
  auto bytes = before;
  bytes[12] = 0xff, bytes[13] = 0xff, bytes[14] = 0xff, bytes[15] = 0x7f;  // n_layer
  std::ofstream(junk, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ASSERT_THROW(TraceReader{junk}, TraceFormatError);
  // A record tag that is no tag.
  bytes = before;
  const auto data_at = bytes.size() - 8;  // the last DONE marker
  bytes[data_at] = 'X';
  std::ofstream(junk, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ASSERT_THROW(TraceReader{junk}, TraceFormatError);
}
