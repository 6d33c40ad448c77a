// Picks the next token from logits: repetition penalty, then temperature,
// top-k, top-p, min-p, then a seeded draw. temperature <= 0 is greedy.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

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
  const SamplerParams& params() const { return params_; }

 private:
  void collectAll(std::span<const float> logits);
  bool collectTopK(std::span<const float> logits, size_t k);

  SamplerParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;
};

}  // namespace moe
