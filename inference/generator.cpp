#include "inference/generator.h"

#include <chrono>
#include <optional>
#include <stdexcept>

#include "inference/text_stream.h"

namespace moe {
namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
int64_t microsSince(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
}

// Marks a GenerationProgress running for the lifetime of one generate() call.
class ProgressScope {
 public:
  ProgressScope(GenerationProgress* p, int prompt_tokens) : p_(p) {
    if (!p_) return;
    p_->prompt_tokens = prompt_tokens;
    p_->prefilled_tokens = 0;
    p_->generated_tokens = 0;
    p_->prefill_us = 0;
    p_->ttft_us = -1;
    p_->decode_us = 0;
    p_->running = true;
  }
  ~ProgressScope() {
    if (p_) p_->running = false;
  }
  GenerationProgress* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  GenerationProgress* p_;
};

}  // namespace

const char* stopReasonName(StopReason r) {
  switch (r) {
    case StopReason::Length: return "length";
    case StopReason::EndToken: return "end-token";
    case StopReason::StopString: return "stop-string";
    case StopReason::Cancelled: return "cancelled";
    case StopReason::ContextFull: return "context-full";
  }
  return "?";
}

double GenerationStats::prefillTokensPerSecond() const {
  const int n = prompt_tokens - reused_tokens;
  return prefill_seconds > 0 ? n / prefill_seconds : 0.0;
}

double GenerationStats::decodeTokensPerSecond() const {
  return decode_seconds > 0 ? decode_steps / decode_seconds : 0.0;
}

Generator::Generator(const Model& model, Transformer& transformer) : model_(model), tf_(transformer) {}

void Generator::reset() {
  cached_.clear();
  tf_.truncate(0);
}

GenerationStats Generator::generate(std::span<const int32_t> prompt, const GenerationParams& params,
                                    const std::function<void(std::string_view)>& on_text,
                                    const std::atomic<bool>* cancel) {
  if (prompt.empty()) throw std::invalid_argument("empty prompt: nothing to generate from");
  if (static_cast<int>(prompt.size()) >= tf_.nCtx()) throw ContextOverflow(int(prompt.size()), tf_.nCtx());
  GenerationStats st;
  st.prompt_tokens = static_cast<int>(prompt.size());
  tf_.setCancelFlag(cancel);
  ProgressScope progress(params.progress, st.prompt_tokens);

  // Keep the cached prefix this prompt shares with the last one (a chat's history);
  // at least one token must run to produce logits.
  size_t keep = 0;
  while (keep < cached_.size() && keep < prompt.size() && cached_[keep] == prompt[keep]) ++keep;
  if (keep == prompt.size()) --keep;
  tf_.truncate(static_cast<int>(keep));
  cached_.resize(keep);
  st.reused_tokens = static_cast<int>(keep);

  // Each step's logits, or where the backend reduces them to the sampler's candidates
  // (greedy: the argmax; else the best top_k + 1), only those.
  Sampler sampler(params.sampler);
  std::vector<float> logits;
  std::vector<LogitCandidate> best;
  bool reduced = false;
  auto step = [&](std::span<const int32_t> tokens) {
    if (tf_.reducesLogits())
      reduced = tf_.forward(tokens, sampler.reduction(cached_, tokens), logits, best);
    else
      tf_.forward(tokens, logits);
  };
  const auto t0 = Clock::now();
  try {
    step(prompt.subspan(keep));
  } catch (const Cancelled&) {
    st.reason = StopReason::Cancelled;
    st.prefill_seconds = secondsSince(t0);
    return st;
  }
  cached_.insert(cached_.end(), prompt.begin() + keep, prompt.end());
  st.prefill_seconds = secondsSince(t0);
  if (progress) {
    progress->prefill_us = microsSince(t0);
    progress->prefilled_tokens = st.prompt_tokens - st.reused_tokens;
  }

  TextStream text(params.stop_strings);
  const auto& tok = model_.tokenizer();
  // Why the reply ends at `next`, once its text went out; nothing: it goes on.
  auto stopsAt = [&](int32_t next) -> std::optional<StopReason> {
    if (params.stop_at_end_token && tok.isEndOfGeneration(next)) return StopReason::EndToken;
    const std::string bytes = params.special_token_text ? tok.tokenText(next) : tok.tokenBytes(next);
    if (auto out = text.push(bytes); !out.empty() && on_text) on_text(out);
    if (text.stopped()) return StopReason::StopString;
    if (st.generated_tokens >= params.max_tokens) return StopReason::Length;
    if (cancel && cancel->load()) return StopReason::Cancelled;
    if (static_cast<int>(cached_.size()) >= tf_.nCtx()) return StopReason::ContextFull;
    return std::nullopt;
  };
  // Decoding with recorded steps runs a step ahead: the step of the token the device
  // chose (greedy) or drew (sampled: the device finishes the host's draw with the
  // uniform the host drew for that token, Sampler::withDraw) is queued before the host
  // reads that token (Transformer::queueChosenStep), so the device never waits for the
  // host; a reply that ends on it drops that step's row. The token after `next` is
  // stepped only where neither max_tokens nor (checked by the Transformer) the context
  // stops the reply first.
  const bool greedy = params.sampler.temperature <= 0.0f;
  const bool pipelined = reduced && (greedy || sampler.drawsFromCandidates()) && tf_.decodesAhead();
  // A step's reduction; sampled, with the draw of the token `ahead` tokens after the
  // next one the host takes.
  auto ending = [&](const LogitsReduction& r, size_t ahead_of_next) {
    return greedy ? r : sampler.withDraw(r, ahead_of_next);
  };
  bool ahead = false;        // a queued step embeds `next` already
  bool drawn_ahead = false;  // `best` and `drawn` are a queued step's: the device drew
  int32_t drawn = -1;
  auto runStep = [&](int32_t next) {
    const int32_t one[1] = {next};
    if (!pipelined) {
      step(one);
      return;
    }
    if (!ahead) tf_.queueStep(next, ending(sampler.reduction(cached_, one), 0));
    const bool wanted = st.generated_tokens + 1 < params.max_tokens && !(cancel && cancel->load());
    ahead = wanted && tf_.queueChosenStep(ending(sampler.reductionOfChosen(cached_, one), 1));
    drawn = tf_.takeCandidates(best);
    drawn_ahead = !greedy;
  };
  Clock::time_point decode_start;
  for (;;) {
    int32_t next = 0;
    try {
      if (drawn_ahead)
        next = sampler.takeDrawn(best, drawn);
      else
        next = reduced ? sampler.sample(best) : sampler.sample(logits, cached_);
    } catch (...) {
      tf_.truncate(static_cast<int>(cached_.size()));  // the step ahead, if any
      throw;
    }
    st.sampled_on_backend = reduced;
    if (st.generated_tokens == 0) {
      st.ttft_seconds = secondsSince(t0);
      decode_start = Clock::now();
      if (progress) progress->ttft_us = microsSince(t0);
    }
    ++st.generated_tokens;
    if (progress) {
      progress->generated_tokens = st.generated_tokens;
      progress->decode_us = microsSince(decode_start);
    }
    if (const std::optional<StopReason> stop = stopsAt(next)) {
      tf_.truncate(static_cast<int>(cached_.size()));  // the step ahead, if any
      st.reason = *stop;
      break;
    }
    try {
      runStep(next);
    } catch (const Cancelled&) {
      st.reason = StopReason::Cancelled;
      break;
    } catch (...) {
      tf_.truncate(static_cast<int>(cached_.size()));  // as if the step never ran
      throw;
    }
    cached_.push_back(next);
    ++st.decode_steps;
    st.decode_logits_bytes += reduced ? best.size() * sizeof(LogitCandidate) : logits.size() * sizeof(float);
  }
  if (st.generated_tokens > 0) st.decode_seconds = secondsSince(decode_start);
  if (auto rest = text.finish(); !rest.empty() && on_text && !text.stopped()) on_text(rest);
  return st;
}

}  // namespace moe
