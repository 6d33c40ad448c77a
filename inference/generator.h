// The generation loop: prefill the prompt in one batch (reusing the cached
// prefix of the conversation), then decode token by token with the sampler,
// streaming text, until a limit, an end token, a stop string or a cancel. Decoding
// with recorded steps runs a step ahead (Transformer::queueChosenStep), greedy or
// sampled with top_k > 0 (the device draws with the host's uniforms): the device never
// waits for the host to read a token.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "inference/model.h"
#include "inference/sampler.h"
#include "inference/transformer.h"

namespace moe {

// Live figures of a running generate(), for a UI that polls them (relaxed
// atomics; a reader may see one counter a step ahead of another).
struct GenerationProgress {
  std::atomic<bool> running{false};
  std::atomic<int> prompt_tokens{0};     // of the current call
  std::atomic<int> prefilled_tokens{0};  // prompt tokens run (not reused), once prefill is done
  std::atomic<int> generated_tokens{0};  // sampled so far
  std::atomic<int64_t> prefill_us{0};    // prompt forward pass, once done
  std::atomic<int64_t> ttft_us{-1};      // start to first sampled token; -1 until then
  std::atomic<int64_t> decode_us{0};     // since the first sampled token
};

struct GenerationParams {
  int max_tokens = 256;
  SamplerParams sampler;
  std::vector<std::string> stop_strings;
  bool stop_at_end_token = true;           // off: the demo bench generates exactly max_tokens
  bool special_token_text = false;         // control tokens reach stop strings and on_text as their text
  GenerationProgress* progress = nullptr;  // optional, updated as generation runs
};

enum class StopReason { Length, EndToken, StopString, Cancelled, ContextFull };
const char* stopReasonName(StopReason r);

struct GenerationStats {
  int prompt_tokens = 0;       // tokens of the prompt
  int reused_tokens = 0;       // of those, already in the KV cache
  int generated_tokens = 0;    // tokens sampled
  int decode_steps = 0;        // single-token forward passes
  double prefill_seconds = 0;  // prompt forward pass
  double decode_seconds = 0;   // all decode steps
  double ttft_seconds = 0;     // start to first sampled token
  // What the sampler read of the decode steps' logits: the rows, or where the backend
  // reduced them (Backend::reduceLogits), the candidates (8 bytes each).
  uint64_t decode_logits_bytes = 0;
  bool sampled_on_backend = false;  // the last token was drawn from reduced logits
  StopReason reason = StopReason::Length;

  double prefillTokensPerSecond() const;  // prefilled (not reused) tokens / prefill time
  double decodeTokensPerSecond() const;   // decode steps / decode time
};

// The prompt does not leave room in the context; each front end says how to raise it.
class ContextOverflow : public std::length_error {
 public:
  ContextOverflow(int prompt_tokens, int context_tokens)
      : std::length_error("prompt has " + std::to_string(prompt_tokens) + " tokens; the context holds " +
                          std::to_string(context_tokens) + " (leave room for the reply)"),
        prompt_tokens(prompt_tokens),
        context_tokens(context_tokens) {}
  int prompt_tokens, context_tokens;
};

class Generator {
 public:
  Generator(const Model& model, Transformer& transformer);

  // Throws std::invalid_argument for an empty prompt and ContextOverflow when the
  // prompt does not fit the context. on_text gets displayable UTF-8 pieces.
  GenerationStats generate(std::span<const int32_t> prompt, const GenerationParams& params,
                           const std::function<void(std::string_view)>& on_text,
                           const std::atomic<bool>* cancel = nullptr);

  // Token ids the KV cache currently holds (prompt + generated, in order).
  const std::vector<int32_t>& cachedTokens() const { return cached_; }
  void reset();

 private:
  const Model& model_;
  Transformer& tf_;
  std::vector<int32_t> cached_;
};

}  // namespace moe
