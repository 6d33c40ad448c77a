// Generation parameters for tests that need the same tokens on every run: greedy
// decoding (temperature 0) of at most max_tokens.
#pragma once

#include "inference/generator.h"

namespace moe::test {

// Stops at the model's end token or after max_tokens.
inline GenerationParams greedy(int max_tokens) {
  GenerationParams p;
  p.max_tokens = max_tokens;
  p.sampler.temperature = 0;
  return p;
}

// Always max_tokens tokens: the end token does not stop it (random weights never
// pick it on purpose, so where it falls says nothing).
inline GenerationParams greedyToTheLimit(int max_tokens) {
  GenerationParams p = greedy(max_tokens);
  p.stop_at_end_token = false;
  return p;
}

}  // namespace moe::test
