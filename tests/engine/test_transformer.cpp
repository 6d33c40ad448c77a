// Forward-pass invariants on every synthetic architecture: a batched prefill
// equals token-by-token decoding, chunked prefill equals one batch, truncating
// the cache and recomputing reproduces the logits, cancel rolls back, the
// context limit is enforced, and the expert order an ExpertSource imposes is
// honoured without changing the result. (Golden logits against an independent
// implementation are in test_golden.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "quant/quant.h"
#include "support/engine_fixture.h"
#include "support/test_log.h"

using namespace moe;

namespace {

// The same experts as the resident source, in reverse order, counting calls.
class ReversingSource : public ExpertSource {
 public:
  explicit ReversingSource(const std::vector<std::vector<ExpertWeights>>& t) : inner_(t) {}
  std::vector<ExpertRef> acquire(int layer, std::span<const int> experts) override {
    auto refs = inner_.acquire(layer, experts);
    std::reverse(refs.begin(), refs.end());
    ++acquires;
    for (const auto& r : refs) order.push_back(r.expert);
    return refs;
  }
  void release(int layer) override {
    inner_.release(layer);
    ++releases;
  }
  void onLayerInput(int, std::span<const float> hidden, int n_tokens) override {
    inputs += n_tokens;
    ASSERT_TRUE(hidden.size() % size_t(n_tokens) == 0);
  }
  ResidentExpertSource inner_;
  int acquires = 0, releases = 0, inputs = 0;
  std::vector<int> order;
};

std::vector<int32_t> someTokens(int n, int vocab, int salt = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((7 + 13 * i + salt * 31) % vocab);
  return t;
}

}  // namespace

// Each architecture's row returns at its first fatal failure; the other rows still run.
TEST(Transformer, batchEqualsSequential) {
  auto row = [](const std::string& arch) {
    EngineFixture f(synth::tinySpec(arch));
    const int nv = f.model->config().n_vocab;
    const auto tokens = someTokens(9, nv);
    auto batch = f.transformer();
    std::vector<float> all;
    batch->forward(tokens, all, true);
    ASSERT_EQ(all.size(), tokens.size() * size_t(nv));
    auto seq = f.transformer();
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::vector<float> one;
      seq->forward(std::span(tokens).subspan(i, 1), one);
      const std::vector<float> ref(all.begin() + i * nv, all.begin() + (i + 1) * nv);
      // Same arithmetic per token; only the summation order of a batch may differ.
      ASSERT_TRUE(relMaxDiff(one, ref) < 1e-4) << "position " << i;
    }
    ASSERT_EQ(seq->nPast(), 9);
  };
  for (const auto& arch : synth::supportedArchs()) {
    SCOPED_TRACE(arch);
    row(arch);
  }
}

TEST(Transformer, chunkedPrefillEqualsOneBatch) {
  EngineFixture f(synth::tinySpec("qwen3moe"));
  const int nv = f.model->config().n_vocab;
  const int n = Transformer::kMaxBatch + 37;  // forces two chunks
  const auto tokens = someTokens(n, nv, 3);
  auto a = f.transformer(512);
  std::vector<float> last, all;
  a->forward(tokens, last);
  auto b = f.transformer(512);
  b->forward(tokens, all, true);
  const std::vector<float> ref(all.end() - nv, all.end());
  ASSERT_TRUE(relMaxDiff(last, ref) < 1e-6);
  ASSERT_EQ(a->nPast(), n);
}

TEST(Transformer, truncateAndRecompute) {
  EngineFixture f(synth::tinySpec("llama"));
  const int nv = f.model->config().n_vocab;
  auto t = f.transformer();
  std::vector<float> first, again, other;
  const auto six = someTokens(6, nv);
  t->forward(six, first);
  t->truncate(3);
  ASSERT_EQ(t->nPast(), 3);
  t->forward(std::span(six).subspan(3), again);
  ASSERT_TRUE(relMaxDiff(again, first) < 1e-6);
  // A different suffix gives different logits (the cache is really used).
  t->truncate(3);
  t->forward(someTokens(3, nv, 5), other);
  ASSERT_TRUE(relMaxDiff(other, first) > 1e-3);
}

TEST(Transformer, cancelRollsBack) {
  EngineFixture f(synth::tinySpec("deepseek"));
  auto t = f.transformer();
  std::vector<float> logits;
  t->forward(someTokens(4, f.model->config().n_vocab), logits);
  std::atomic<bool> cancel{true};
  t->setCancelFlag(&cancel);
  ASSERT_THROW(t->forward(someTokens(4, f.model->config().n_vocab), logits), Cancelled);
  ASSERT_EQ(t->nPast(), 4);
}

TEST(Transformer, contextLimitAndBadIds) {
  EngineFixture f(synth::tinySpec("olmoe"));
  auto t = f.transformer(8);
  std::vector<float> logits;
  ASSERT_THROW(t->forward(someTokens(9, 100), logits), std::length_error);
  ASSERT_EQ(t->nPast(), 0);
  const int32_t bad[1] = {f.model->config().n_vocab};
  ASSERT_THROW(t->forward(bad, logits), std::out_of_range);
}

TEST(Transformer, expertOrderIsHonouredAndHarmless) {
  // The resident source's experts are computed together (allReady), the
  // reversing one's one by one in its order: the same bits. 5 tokens fit one
  // batch of experts; 200 tokens' (token, expert) rows overflow the scratch
  // and are computed in several.
  auto row = [](const std::string& arch, int n_tokens) {
    EngineFixture f(synth::tinySpec(arch));
    const auto& c = f.model->config();
    const auto tokens = someTokens(n_tokens, c.n_vocab, 2);
    std::vector<float> plain, reordered;
    f.transformer()->forward(tokens, plain, true);
    ReversingSource rev(f.model->hostExperts());
    auto t = f.transformer(256, &rev);
    std::vector<std::pair<int, int>> routed;  // (layer, expert) from the observer
    t->setRoutingObserver([&](const RoutingEvent& ev) {
      ASSERT_EQ(int(ev.experts.size()), ev.n_tokens * c.n_expert_used);
      for (size_t i = 0; i < ev.weights.size(); ++i) ASSERT_TRUE(ev.weights[i] > 0.0f);
    });
    t->forward(tokens, reordered, true);
    ASSERT_TRUE(reordered == plain);  // outputs are summed in rank order: bit-identical
    int moe_layers = 0;
    for (int il = 0; il < c.n_layer; ++il) moe_layers += c.isMoeLayer(il);
    // One batch; with recurrent layers two (a prefill stops a token short of its end
    // for a snapshot of the state there).
    const int batches = c.hasRecurrentLayers() ? 2 : 1;
    ASSERT_EQ(rev.acquires, batches * moe_layers);
    ASSERT_EQ(rev.releases, batches * moe_layers);
    ASSERT_EQ(rev.inputs, moe_layers * n_tokens);
  };
  for (const auto& arch : synth::supportedArchs())
    for (int n : {5, 200}) {
      SCOPED_TRACE(moe::test::format("%s/%d", arch.c_str(), n));
      row(arch, n);
    }
}

TEST(Transformer, routingWeightsFollowTheArchitecture) {
  // Mixtral-style (llama) renormalises the top-k weights to 1; qwen2moe does not.
  for (const char* arch : {"llama", "qwen2moe"}) {
    EngineFixture f(synth::tinySpec(arch));
    auto t = f.transformer();
    bool sums_to_one = true;
    t->setRoutingObserver([&](const RoutingEvent& ev) {
      const int k = f.model->config().n_expert_used;
      for (int tok = 0; tok < ev.n_tokens; ++tok) {
        float s = 0;
        for (int j = 0; j < k; ++j) s += ev.weights[size_t(tok) * k + j];
        sums_to_one = sums_to_one && std::abs(s - 1.0f) < 1e-5f;
      }
    });
    std::vector<float> logits;
    t->forward(someTokens(4, f.model->config().n_vocab), logits);
    ASSERT_EQ(sums_to_one, std::string(arch) == "llama");
  }
}

TEST(Transformer, hiddenObserverReportsEveryLayer) {
  EngineFixture f(synth::tinySpec("deepseek"));
  const auto& c = f.model->config();
  auto t = f.transformer();
  std::vector<int> indices;
  std::vector<float> embeddings;
  t->setHiddenObserver([&](const HiddenEvent& ev) {
    indices.push_back(ev.index);
    ASSERT_EQ(ev.values.size(), size_t(ev.n_tokens) * c.n_embd);
    if (ev.index == 0) embeddings.assign(ev.values.begin(), ev.values.end());
  });
  const auto tokens = someTokens(3, c.n_vocab);
  std::vector<float> logits;
  t->forward(tokens, logits);
  ASSERT_EQ(int(indices.size()), c.n_layer + 1);
  for (int i = 0; i <= c.n_layer; ++i) ASSERT_EQ(indices[i], i);
  // hidden_0 is the dequantised embedding row of each token, read from the file (the
  // backend may hold the matrix in interleaved row groups).
  std::vector<float> row(c.n_embd);
  const auto* emb = f.model->file().findTensor("token_embd.weight");
  ASSERT_TRUE(emb != nullptr);
  const uint8_t* emb_data = f.model->file().tensorData(*emb).data();
  const auto type = f.model->weights().token_embd.type;
  const size_t row_bytes = gguf::rowBytes(type, uint64_t(c.n_embd));
  for (size_t k = 0; k < tokens.size(); ++k) {
    quant::dequantizeRow(type, emb_data + size_t(tokens[k]) * row_bytes, row.data(), c.n_embd);
    ASSERT_TRUE(std::equal(row.begin(), row.end(), embeddings.begin() + k * c.n_embd));
  }
}

// deepseek2's two file layouts of W_UK / W_UV (llama.cpp's attn_k_b + attn_v_b, the
// older attn_kv_b) hold the same F16 values in the synthetic models: the same
// logits, bit for bit. The cached rows are the latent's width, not n_head full K/V.
TEST(Transformer, latentAttentionLayoutsGiveTheSameLogits) {
  auto spec = synth::tinySpec("deepseek2");
  EngineFixture split(spec);
  spec.mla_split = false;
  EngineFixture older(spec);
  ASSERT_TRUE(split.model->file().findTensor("blk.0.attn_k_b.weight"));
  ASSERT_TRUE(older.model->file().findTensor("blk.0.attn_kv_b.weight"));
  const ModelConfig& c = split.model->config();
  ASSERT_EQ(c.n_head_kv, 1);
  ASSERT_EQ(c.kvWidth(), c.mla.kv_lora + c.n_rot);
  ASSERT_EQ(older.model->config().kvWidth(), c.kvWidth());
  const auto tokens = someTokens(11, c.n_vocab);
  std::vector<float> a, b;
  split.transformer()->forward(tokens, a, true);
  older.transformer()->forward(tokens, b, true);
  ASSERT_TRUE(a == b);
}

TEST(Transformer, tiedOutputUsesEmbedding) {
  auto spec = synth::tinySpec("qwen3moe");
  spec.tied_output = true;
  EngineFixture f(spec);
  ASSERT_TRUE(f.model->weights().output_tied);
  ASSERT_EQ(f.model->weights().output.data, f.model->weights().token_embd.data);
  std::vector<float> logits;
  f.transformer()->forward(someTokens(3, f.model->config().n_vocab), logits);
  ASSERT_TRUE(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));
}

// qwen35moe's delta-net layers carry a recurrent state per sequence instead of KV rows:
// it must survive between calls (prefill, decode steps, more prefill), across prefill
// chunks, and be rebuilt after a rollback or a step cancelled half-way.
namespace {

std::vector<float> rowsOf(const std::vector<float>& all, int first, int count, int nv) {
  return std::vector<float>(all.begin() + size_t(first) * nv, all.begin() + size_t(first + count) * nv);
}

}  // namespace

TEST(Transformer, recurrentStateCarriesAcrossTurns) {
  EngineFixture f(synth::tinySpec("qwen35moe"));
  const int nv = f.model->config().n_vocab;
  const auto prompt = someTokens(7, nv, 1), reply = someTokens(5, nv, 2), next = someTokens(6, nv, 3);
  std::vector<int32_t> whole = prompt;
  whole.insert(whole.end(), reply.begin(), reply.end());
  whole.insert(whole.end(), next.begin(), next.end());
  auto scratch = f.transformer();
  std::vector<float> ref;
  scratch->forward(whole, ref, true);

  auto t = f.transformer();
  std::vector<float> logits;
  t->forward(prompt, logits);  // turn 1: prefill
  ASSERT_TRUE(relMaxDiff(logits, rowsOf(ref, 6, 1, nv)) < 1e-5);
  for (size_t i = 0; i < reply.size(); ++i) {  // decode steps
    t->forward(std::span(reply).subspan(i, 1), logits);
    ASSERT_TRUE(relMaxDiff(logits, rowsOf(ref, int(prompt.size() + i), 1, nv)) < 1e-5) << "step " << i;
  }
  t->forward(next, logits, true);  // turn 2: prefill more tokens
  ASSERT_TRUE(relMaxDiff(logits, rowsOf(ref, 12, 6, nv)) < 1e-5);
  ASSERT_EQ(t->nPast(), 18);
}

TEST(Transformer, recurrentStateFollowsRollback) {
  EngineFixture f(synth::tinySpec("qwen35moe"));
  const int nv = f.model->config().n_vocab;
  const auto a = someTokens(10, nv, 4), b = someTokens(4, nv, 5);
  auto t = f.transformer();
  std::vector<float> logits, ref;
  t->forward(a, logits);
  // Back to 6 tokens, then another continuation: as a fresh run over a[0..6) + b.
  t->truncate(6);
  ASSERT_EQ(t->nPast(), 6);
  t->forward(b, logits, true);
  std::vector<int32_t> whole(a.begin(), a.begin() + 6);
  whole.insert(whole.end(), b.begin(), b.end());
  f.transformer()->forward(whole, ref, true);
  ASSERT_TRUE(relMaxDiff(logits, rowsOf(ref, 6, 4, nv)) < 1e-5);
  // The state was really rebuilt: carrying the 10-token state on would differ.
  auto stale = f.transformer();
  stale->forward(a, logits);
  std::vector<int32_t> longer = a;
  longer.insert(longer.end(), b.begin(), b.end());
  std::vector<float> other;
  f.transformer()->forward(longer, other, true);
  ASSERT_TRUE(relMaxDiff(rowsOf(other, 10, 4, nv), rowsOf(ref, 6, 4, nv)) > 1e-3);
  // Back to 0: a fresh sequence.
  t->truncate(0);
  t->forward(b, logits, true);
  f.transformer()->forward(b, ref, true);
  ASSERT_TRUE(relMaxDiff(logits, ref) < 1e-5);
}

// A prefill leaves a snapshot of the state one token before its end: regenerating the
// reply (back to that token) recomputes nothing, the next turn one token, and a cut
// below every snapshot the whole kept prefix.
TEST(Transformer, recurrentStateSnapshotsSpareTheRecompute) {
  EngineFixture f(synth::tinySpec("qwen35moe"));
  const int nv = f.model->config().n_vocab;
  const auto prompt = someTokens(10, nv, 11), reply = someTokens(3, nv, 12), next = someTokens(6, nv, 13);
  auto t = f.transformer();
  std::vector<float> first, logits, ref;
  t->forward(prompt, first);
  for (size_t i = 0; i < reply.size(); ++i) t->forward(std::span(reply).subspan(i, 1), logits);
  // Regenerate: back to the prompt's last token, which runs again.
  t->truncate(9);
  t->forward(std::span(prompt).subspan(9, 1), logits);
  ASSERT_EQ(t->recomputedTokens(), 0);
  ASSERT_TRUE(logits == first) << "the restored state gave other logits";
  // The next turn after a reply the template wrote differently: back to the prompt.
  for (size_t i = 0; i < reply.size(); ++i) t->forward(std::span(reply).subspan(i, 1), logits);
  t->truncate(10);
  t->forward(next, logits, true);
  ASSERT_EQ(t->recomputedTokens(), 1);  // the prompt's last token, after the snapshot
  std::vector<int32_t> whole = prompt;
  whole.insert(whole.end(), next.begin(), next.end());
  f.transformer()->forward(whole, ref, true);
  ASSERT_TRUE(relMaxDiff(logits, rowsOf(ref, 10, 6, nv)) < 1e-5);
  // Below every snapshot: the kept prefix again, from an empty state.
  t->truncate(4);
  t->forward(next, logits, true);
  ASSERT_EQ(t->recomputedTokens(), 1 + 4);
  std::vector<int32_t> cut(prompt.begin(), prompt.begin() + 4);
  cut.insert(cut.end(), next.begin(), next.end());
  f.transformer()->forward(cut, ref, true);
  ASSERT_TRUE(relMaxDiff(logits, rowsOf(ref, 4, 6, nv)) < 1e-5);
}

TEST(Transformer, recurrentStateSurvivesAStepCancelledHalfWay) {
  EngineFixture f(synth::tinySpec("qwen35moe"));
  const int nv = f.model->config().n_vocab;
  const auto a = someTokens(5, nv, 6), b = someTokens(3, nv, 7);
  auto t = f.transformer();
  std::vector<float> logits, ref;
  t->forward(a, logits);
  // Cancel after layer 0 (a delta-net layer) has advanced its state over b.
  std::atomic<bool> cancel{false};
  t->setCancelFlag(&cancel);
  t->setHiddenObserver([&](const HiddenEvent& e) {
    if (e.index == 1) cancel = true;
  });
  ASSERT_THROW(t->forward(b, logits), Cancelled);
  ASSERT_EQ(t->nPast(), 5);
  t->setHiddenObserver(nullptr);
  cancel = false;
  t->forward(b, logits, true);
  std::vector<int32_t> whole = a;
  whole.insert(whole.end(), b.begin(), b.end());
  f.transformer()->forward(whole, ref, true);
  ASSERT_TRUE(relMaxDiff(logits, rowsOf(ref, 5, 3, nv)) < 1e-5);
}

TEST(Transformer, recurrentStateCrossesPrefillChunks) {
  EngineFixture f(synth::tinySpec("qwen35moe"));
  const int nv = f.model->config().n_vocab;
  const int n = Transformer::kMaxBatch + 37;  // two chunks in one call
  const auto tokens = someTokens(n, nv, 8);
  std::vector<float> one, parts, step;
  f.transformer(512)->forward(tokens, one, true);
  auto t = f.transformer(512);
  t->forward(std::span(tokens).subspan(0, 100), parts);
  t->forward(std::span(tokens).subspan(100, n - 101), parts);
  t->forward(std::span(tokens).subspan(n - 1, 1), step);
  ASSERT_TRUE(relMaxDiff(step, rowsOf(one, n - 1, 1, nv)) < 1e-5);
  ASSERT_TRUE(relMaxDiff(parts, rowsOf(one, n - 2, 1, nv)) < 1e-5);
}

// gemma4: past the sliding window (8) and across steps, the sliding layers' windows, the
// global layers' whole context and the shared-KV layers' reads of earlier layers' caches
// give what one batch gives; a truncated cache recomputes the same.
TEST(Transformer, gemma4WindowsAndSharedKvAcrossSteps) {
  EngineFixture f(synth::tinySpec("gemma4"));
  const int nv = f.model->config().n_vocab;
  const auto tokens = someTokens(21, nv, 4);
  auto batch = f.transformer();
  std::vector<float> all;
  batch->forward(tokens, all, true);
  auto steps = f.transformer();
  std::vector<float> part, last;
  steps->forward(std::span(tokens).first(7), part);
  steps->forward(std::span(tokens).subspan(7, 13), part);
  steps->forward(std::span(tokens).subspan(20), last);
  const std::vector<float> ref(all.end() - nv, all.end());
  ASSERT_TRUE(relMaxDiff(last, ref) < 1e-4);
  steps->truncate(10);
  std::vector<float> again;
  steps->forward(std::span(tokens).subspan(10), again);
  ASSERT_TRUE(relMaxDiff(again, ref) < 1e-4);
  // A different token inside the window of the last position changes its logits.
  auto other = tokens;
  other[18] = (other[18] + 1) % nv;
  steps->truncate(0);
  std::vector<float> changed;
  steps->forward(other, changed);
  ASSERT_TRUE(relMaxDiff(changed, ref) > 1e-3);
}
