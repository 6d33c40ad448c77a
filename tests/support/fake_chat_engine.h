// A scripted ChatEngine for GUI tests: no model, no GPU. It "generates" the
// words of a fixed reply, one per token, optionally pausing between tokens, and
// moves offload counters the way a cache would (so the strip has data). It
// honours cancel between tokens like the real engine.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "app/core/chat_engine.h"

namespace moe::test {

class FakeChatEngine final : public ChatEngine {
 public:
  std::vector<std::string> words = {"Hello", " from", " the", " **fake**", " engine", "."};
  std::chrono::milliseconds per_token{0};
  // True: a reply streams two words, then holds the rest back (until false or
  // cancelled) while its expert counters go on moving every 20 ms, so a test sees a
  // reply in progress, its text on screen and live figures, for as long as it needs,
  // whatever the machine's speed. The two words come 100 ms apart: InferenceWorker
  // passes text on when a word comes 40 ms (kCoalesceMs) or more after its last emit.
  std::atomic<bool> hold_after_first{false};
  // n >= 0: a reply streams n words and, 100 ms later, one more (so the worker
  // passes on the text it coalesced, as for hold_after_first), then holds the rest
  // back until hold_at changes or the reply is cancelled: a test acts on a reply in
  // progress however slow the machine is.
  std::atomic<int> hold_at{-1};
  std::string fail_load_with;    // non-empty: load() throws this
  std::string fail_reply_with;   // non-empty: reply() throws this
  std::string offload_note;      // what the load reports about the expert cache (the status bar shows it)
  int left_out = 0;              // the oldest messages each reply reports it left out to fit the context
  bool thinking_switch = false;  // what the load reports: the template can turn reasoning off
  std::atomic<int> replies_thinking{0}, replies_not_thinking{0};  // by the options each reply was given
  std::atomic<int> replies{0};
  // Whether the reply in progress was asked to stop (read at once: a stop request
  // sets the flag it polls on the caller's thread).
  bool cancelRequested() const {
    const std::atomic<bool>* c = live_cancel_.load();
    return c && c->load();
  }
  std::vector<ChatMessage> last_messages;  // guarded by mu_
  mutable std::mutex mu_;

  LoadedModelInfo load(const EngineLoadOptions& opts, const LoadProgress& progress) override {
    if (progress) progress(0.5, "reading");
    if (!fail_load_with.empty()) throw std::runtime_error(fail_load_with);
    loaded_ = true;
    LoadedModelInfo info;
    info.demo = opts.demo;
    info.path = opts.model_path;
    info.name = opts.demo ? "Demo model" : "fake.gguf";
    info.architecture = "fake";
    info.backend = "cpu";
    info.policy = opts.policy;
    info.n_layer = 4;
    info.n_expert = 8;
    info.n_expert_used = 2;
    info.n_ctx = 4096;
    info.offload_note = offload_note;
    info.thinking_switch = thinking_switch;
    if (progress) progress(1.0, "ready");
    return info;
  }
  bool loaded() const override { return loaded_; }
  void setChatOptions(const ChatOptions& options) override { thinking_ = options.thinking; }

  EngineReplyStats reply(const std::vector<ChatMessage>& messages, const GenerationParams& params,
                         const TextSink& on_text, const std::atomic<bool>& cancel) override {
    {
      std::lock_guard lock(mu_);
      last_messages = messages;
    }
    ++replies;
    ++(thinking_ ? replies_thinking : replies_not_thinking);
    live_cancel_ = &cancel;
    if (!fail_reply_with.empty()) throw std::runtime_error(fail_reply_with);
    EngineReplyStats st;
    st.prompt_tokens = static_cast<int>(messages.size()) * 10;
    generating_ = true;
    prefilled_ = st.prompt_tokens;
    generated_ = 0;
    st.stop_reason = "length";
    st.dropped_messages = left_out;
    const int limit = std::min<int>(params.max_tokens, static_cast<int>(words.size()));
    for (int i = 0; i < limit; ++i) {
      if (cancel.load()) {
        st.stop_reason = "cancelled";
        break;
      }
      if (per_token.count()) std::this_thread::sleep_for(per_token);
      if ((i == 1 && hold_after_first.load()) || i == hold_at.load())
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      while (((i > 1 && hold_after_first.load()) || (i > 0 && i - 1 == hold_at.load())) && !cancel.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        uses_ += 4;
        ready_ += 3;
        prefetched_ += 1;
      }
      on_text(words[static_cast<size_t>(i)]);
      ++generated_;
      uses_ += 4;
      ready_ += 3;
      prefetched_ += 1;
      misses_ += 1;
      bytes_ += 1'000'000;
    }
    st.completion_tokens = generated_;
    st.ttft_ms = 1;
    st.decode_tps = 100;
    st.prefill_tps = 1000;
    generating_ = false;
    return st;
  }

  EngineCounters counters() const override {
    EngineCounters c;
    c.generating = generating_;
    c.prompt_tokens = prefilled_;
    c.prefilled_tokens = prefilled_;
    c.prefill_seconds = prefilled_ > 0 ? 0.01 : 0;
    c.generated_tokens = generated_;
    c.ttft_seconds = generated_ > 0 ? 0.001 : -1;
    c.decode_seconds = generated_ * 0.01;
    c.experts_resident = false;
    c.offload.expert_uses = uses_;
    c.offload.ready_hits = ready_;
    c.offload.prefetch_hits = prefetched_;
    c.offload.misses = misses_;
    c.offload.bytes_h2d = bytes_;
    c.link_bytes_per_second = 25e9;
    return c;
  }

  ExpertResidency residency() const override {
    ExpertResidency r;
    r.n_layer = 4;
    r.n_expert = 8;
    r.state.assign(32, ExpertPlace::kAbsent);
    for (size_t i = 0; i < r.state.size(); i += 3) r.state[i] = ExpertPlace::kReady;
    r.state[1] = ExpertPlace::kLoading;
    return r;
  }

 private:
  bool thinking_ = true;  // set on the engine thread before each reply
  std::atomic<bool> loaded_{false}, generating_{false};
  std::atomic<const std::atomic<bool>*> live_cancel_{nullptr};  // the flag of the latest reply
  std::atomic<int> prefilled_{0}, generated_{0};
  std::atomic<uint64_t> uses_{0}, ready_{0}, prefetched_{0}, misses_{0}, bytes_{0};
};

}  // namespace moe::test
