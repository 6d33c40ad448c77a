// Picks the next token from logits: repetition penalty, then temperature,
// top-k, top-p, min-p, then a seeded draw. temperature <= 0 is greedy.
// From the whole row, or from the best top_k + 1 entries a backend reduced it to
// (reduction(), then sample(candidates)): the same token for the same seed.
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <vector>

#include "inference/logit_candidates.h"

namespace moe {

struct SamplerParams {
  float temperature = 0.8f;
  int top_k = 40;               // <= 0: off
  float top_p = 0.95f;          // >= 1: off
  float min_p = 0.05f;          // <= 0: off; keeps tokens with p >= min_p * p_max
  float repeat_penalty = 1.1f;  // 1: off (llama.cpp convention: divide positive logits, multiply negative)
  int repeat_last_n = 64;       // how many recent tokens the penalty looks at
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(SamplerParams params);
  // logits: [n_vocab], modified in place. history: tokens so far (prompt + generated).
  int32_t sample(std::span<float> logits, std::span<const int32_t> history);
  // What a backend must reduce the next row to (Backend::reduceLogits) for
  // sample(candidates): the argmax when greedy, else the best top_k + 1 entries; k = 0
  // when every entry is needed (top_k off). The penalty is over `history` then `more`
  // (the tokens the step runs). The span it holds stays valid until the next call.
  LogitsReduction reduction(std::span<const int32_t> history, std::span<const int32_t> more);
  // The same for a step whose token (after `history` then `more`) the host does not
  // know yet: the device's last greedy choice (LogitsReduction::penalise_chosen).
  LogitsReduction reductionOfChosen(std::span<const int32_t> history, std::span<const int32_t> more);
  // The token sample(logits, history) would draw, from the row's best entries as the
  // reduction asked for them (best first; the sanitise and penalty already applied).
  int32_t sample(std::span<const LogitCandidate> best);
  const SamplerParams& params() const { return params_; }

  // A sampled decode a step ahead (the Generator): the device finishes the draw over
  // the candidates (LogitsReduction::draw), with the uniform sample(candidates) would
  // have drawn for that token, so a seed gives the same tokens. Whether the draw can
  // run there: temperature > 0 and top_k > 0 (the candidates' path; else the row).
  bool drawsFromCandidates() const { return params_.temperature > 0.0f && params_.top_k > 0; }
  // r with the draw of a token not taken yet: `ahead` tokens after the next one. Its
  // uniform is drawn from the seeded stream on first use and kept until takeDrawn, so a
  // step that was then not queued leaves it to the next.
  LogitsReduction withDraw(LogitsReduction r, size_t ahead);
  // The token the device drew for the next token (`drawn`, from best: the candidates
  // of its reduction), checked as sample(best) checks them (it throws alike); the
  // uniform of that draw is spent.
  int32_t takeDrawn(std::span<const LogitCandidate> best, int32_t drawn);

 private:
  void collectAll(std::span<const float> logits);
  bool collectTopK(std::span<const float> logits, size_t k);
  // Top-k over candidates_, softmax with temperature, top-p, min-p, the draw. x_max_logit:
  // the highest logit; left_out: a finite logit is not a candidate; row: the whole row
  // (walked in id order when nothing is cut) or empty.
  int32_t draw(size_t k, bool left_out, float x_max_logit, std::span<const float> row);

  // The uniform of the next draw: the oldest one withDraw handed out, else a new one.
  double nextUniform();
  // Checks sample(best) makes before its draw.
  void checkCandidates(std::span<const LogitCandidate> best) const;

  SamplerParams params_;
  std::mt19937_64 rng_;
  std::deque<double> drawn_ahead_;  // uniforms handed to the device, oldest first
  std::vector<std::pair<float, int32_t>> candidates_;
  std::vector<int32_t> penalised_;
  // The reduction over history, more and `unknown` tokens the device holds.
  LogitsReduction reductionWith(std::span<const int32_t> history, std::span<const int32_t> more,
                                size_t unknown);
};

}  // namespace moe
