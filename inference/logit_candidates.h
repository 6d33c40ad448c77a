// What a backend reduces a logits row to for the sampler, so that a step reads back a
// few candidates instead of the whole row (Backend::reduceLogits, Sampler::reduction).
#pragma once

#include <cstdint>
#include <span>

namespace moe {

// One entry of a logits row: its value after the sampler's first steps (sanitise,
// repetition penalty) and its token id.
struct LogitCandidate {
  float value = 0.0f;
  int32_t id = -1;
};

// The best k entries of a row after the sampler's first steps: NaN -> -inf, +inf ->
// the largest finite float, then each token of `penalised` once: a positive value
// divided by `penalty`, any other multiplied by it. Best first: the higher value,
// then the lower id. Entries past the row's length are {-inf, -1}.
struct LogitsReduction {
  int k = 0;                           // entries wanted (1: the argmax); 0: the whole row is needed
  float penalty = 1.0f;                // > 0
  std::span<const int32_t> penalised;  // distinct ids, ascending (those outside the row: none)
  // Also the token the device chose at the last greedy reduction, unless listed: the
  // step's own token, queued before the host read it (Backend::StepValues).
  bool penalise_chosen = false;
  // The sampler's draw on the device (a sampled decode a step ahead): the backend
  // finishes Sampler::sample(candidates) over the best k = top_k + 1 entries with the
  // host's `uniform` for this token, and leaves the token where the next step's embed
  // reads it (as a greedy reduction does), so the host need not read it first.
  bool draw = false;
  double uniform = 0.0;  // in [0, 1), drawn by the host in the order it would have drawn it
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;  // > 0; >= 1: off; <= 0: off
};

}  // namespace moe
