// Replies decoded a step ahead and in today's order, for cuda_decode_ahead (greedy)
// and cuda_sampled_ahead (sampled): a tiny model on the device with its experts
// resident; a reply with what it left behind (tokens, stats, nPast(), one more step's
// logits over the cache); the same reply in today's order (a routing observer keeps
// every step on the host's path: the host reads each token, then launches its step);
// and on the stand-in, the host waits of one decode as the stand-in counted them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/generator.h"
#include "inference/transformer.h"
#include "models/gguf.h"
#include "offload/resident_expert_source.h"
#include "support/test_log.h"
#include "synth/synthetic_model.h"

#if MOECHAT_CUDA_STANDIN
#include "cuda_standin.h"
#endif

namespace moe::test {

// A tiny model on the device with its experts resident.
struct Tiny {
  std::unique_ptr<Model> model;
  std::vector<std::vector<ExpertWeights>> table;
  std::unique_ptr<ResidentExpertSource> resident;
  Tiny(Backend& gpu, const gguf::GgufWriter& w) {
    const auto bytes = w.toBytes();
    model = Model::load(gguf::GgufFile::fromBytes(bytes), gpu);
    table = prepareExperts(gpu, model->hostExperts());
    resident = std::make_unique<ResidentExpertSource>(table);
  }
  Tiny(Backend& gpu, const std::string& arch) : Tiny(gpu, synth::buildModel(synth::tinySpec(arch))) {}
};

inline const std::vector<int32_t> kAheadPrompt = {1, 2, 3, 4, 5, 6, 7, 3, 2};

struct Reply {
  std::vector<int32_t> tokens;  // generated and cached
  GenerationStats stats;
  int n_past = 0;
  bool ahead = false;        // the Transformer could decode ahead
  std::vector<float> probe;  // one more step's logits over what the reply left cached
};

struct ReplySetup {
  GenerationParams params;
  int n_ctx = 96;
  bool todays_order = false;  // a routing observer: every step on the host's path
  int cancel_after = 0;       // > 0: cancel once that many pieces of text went out
};

inline Reply reply(Backend& gpu, const Model& model, ExpertSource& experts, const ReplySetup& s) {
  Transformer t(model, gpu, experts, s.n_ctx);
  if (s.todays_order) t.setRoutingObserver([](const RoutingEvent&) {});
  Generator g(model, t);
  std::atomic<bool> cancel{false};
  int pieces = 0;
  Reply r;
  r.ahead = t.decodesAhead();
  r.stats = g.generate(
      kAheadPrompt, s.params,
      [&](std::string_view) { cancel = s.cancel_after > 0 && ++pieces >= s.cancel_after; }, &cancel);
  r.tokens.assign(g.cachedTokens().begin() + std::ptrdiff_t(kAheadPrompt.size()), g.cachedTokens().end());
  r.n_past = t.nPast();
  t.setCancelFlag(nullptr);
  // The rows the reply left: a step after them (or, in a full context, over all but the last).
  int32_t probe = 5;
  if (t.nPast() >= t.nCtx()) {
    probe = g.cachedTokens().back();
    t.truncate(t.nPast() - 1);
  }
  t.forward(std::span(&probe, 1), r.probe);
  return r;
}

// The same reply decoded ahead and in today's order; returns the one decoded ahead.
inline Reply expectTodaysReply(Backend& gpu, const Model& model, ExpertSource& experts, ReplySetup s,
                               const std::string& what, bool ahead = true) {
  s.todays_order = false;
  const Reply got = reply(gpu, model, experts, s);
  s.todays_order = true;
  const Reply want = reply(gpu, model, experts, s);
  info("%s: %zu tokens, %s, nPast %d", what.c_str(), got.tokens.size(), stopReasonName(got.stats.reason),
       got.n_past);
  EXPECT_EQ(got.ahead, ahead) << what;
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.stats.reason, want.stats.reason) << what;
  EXPECT_EQ(got.stats.generated_tokens, want.stats.generated_tokens) << what;
  EXPECT_EQ(got.stats.decode_steps, want.stats.decode_steps) << what;
  EXPECT_EQ(got.stats.decode_logits_bytes, want.stats.decode_logits_bytes) << what;
  EXPECT_EQ(got.n_past, want.n_past) << what;
  EXPECT_TRUE(got.probe == want.probe) << what << ": the cached rows differ";
  return got;
}

#if MOECHAT_CUDA_STANDIN
// The decode of one reply as the stand-in saw it: each host wait after the first decode
// step began (whether it stalled, the graph launches counted when it was made) and the
// totals over the decode.
struct DecodeWaits {
  std::vector<bool> stalling;
  std::vector<uint64_t> launches_at;  // since the decode began
  cudastandin::StreamCounters work;
  uint64_t pinned_bytes = 0;  // host memory pinned over the decode
  int steps = 0;
  std::vector<int32_t> tokens;
};

inline DecodeWaits watchDecode(Backend& gpu, const Model& model, ExpertSource& experts,
                               const SamplerParams& sp, int max_tokens, bool observe_routing = false) {
  Transformer t(model, gpu, experts, 96);
  if (observe_routing) t.setRoutingObserver([](const RoutingEvent&) {});
  DecodeWaits w;
  bool decoding = false;
  cudastandin::StreamCounters at_decode;
  uint64_t pinned_at_decode = 0;
  t.setBatchObserver([&](const BatchEvent& ev) {
    if (decoding || ev.first_pos < int(kAheadPrompt.size())) return;
    decoding = true;
    const cudastandin::DeviceCounters now = cudastandin::totals();
    at_decode = now.all;
    pinned_at_decode = now.pinned_bytes;
  });
  cudastandin::setHostWaitObserver([&](bool stalling) {
    if (!decoding) return;
    w.stalling.push_back(stalling);
    w.launches_at.push_back(cudastandin::totals().all.graph_launches - at_decode.graph_launches);
  });
  Generator g(model, t);
  GenerationParams p;
  p.max_tokens = max_tokens;
  p.sampler = sp;
  p.stop_at_end_token = false;
  const GenerationStats st = g.generate(kAheadPrompt, p, nullptr);
  cudastandin::setHostWaitObserver(nullptr);
  const cudastandin::DeviceCounters totals = cudastandin::totals();
  const cudastandin::StreamCounters end = totals.all;
  w.pinned_bytes = totals.pinned_bytes - pinned_at_decode;
  w.work = end;
  w.work.kernel_launches -= at_decode.kernel_launches;
  w.work.graph_launches -= at_decode.graph_launches;
  w.work.host_syncs -= at_decode.host_syncs;
  w.work.stalling_host_syncs -= at_decode.stalling_host_syncs;
  w.work.stream_syncs -= at_decode.stream_syncs;
  w.steps = st.decode_steps;
  w.tokens.assign(g.cachedTokens().begin() + std::ptrdiff_t(kAheadPrompt.size()), g.cachedTokens().end());
  return w;
}

// The steady state of a resident decode a step ahead: per token one graph launch, one
// host wait that does not stall (the next step is queued behind the token's copy), no
// stream wait, no kernel launched alone, no host memory pinned; the wait for token n is
// made once step n + 1 is launched. Only the last token's wait stalls: no step follows it.
inline void expectNoStallAhead(const DecodeWaits& w, int tokens, const std::string& what) {
  const double n = w.steps;
  info(
      "%s, %d steps: per token %.3f graph launches, %.3f kernel launches, %.3f host waits, %.3f of them "
      "stalling, %.3f stream waits",
      what.c_str(), w.steps, double(w.work.graph_launches) / n, double(w.work.kernel_launches) / n,
      double(w.work.host_syncs) / n, double(w.work.stalling_host_syncs) / n, double(w.work.stream_syncs) / n);
  ASSERT_EQ(w.steps, tokens - 1) << what;
  ASSERT_EQ(w.work.graph_launches, uint64_t(w.steps)) << what;
  ASSERT_EQ(w.work.kernel_launches, uint64_t(0)) << what;
  ASSERT_EQ(w.work.stream_syncs, uint64_t(0)) << what;
  ASSERT_EQ(w.work.host_syncs, uint64_t(w.steps)) << what;  // token 1 .. tokens - 1
  ASSERT_EQ(w.pinned_bytes, uint64_t(0)) << what << ": host memory pinned during the decode";
  ASSERT_EQ(w.stalling.size(), size_t(w.steps)) << what;
  for (size_t i = 0; i + 1 < w.stalling.size(); ++i) {
    // Wait i reads token i + 1, the choice of step i + 1; step i + 2 embeds it.
    EXPECT_FALSE(w.stalling[i]) << what << ": the wait for token " << i + 1 << " stalled the device";
    EXPECT_EQ(w.launches_at[i], uint64_t(i + 2)) << what << ": the wait for token " << i + 1;
  }
  EXPECT_TRUE(w.stalling.back()) << what << ": the last token: nothing follows it";
  EXPECT_EQ(w.work.stalling_host_syncs, uint64_t(1)) << what;
}
#endif

}  // namespace moe::test
