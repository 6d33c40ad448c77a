// What computing one routed expert on the CPU costs, measured on this machine:
// the input of the cpu-experts rule (compute a missed expert from its host copy
// when that is sooner than copying it). Measured once at start with the CPU
// backend on a real expert of the store, for 1 token (decode) and 8 tokens; other
// batch sizes are interpolated linearly (the weights are read once per call, so
// the cost grows much slower than the token count).
#pragma once

#include "inference/backend.h"
#include "offload/host_expert_store.h"

namespace moe {

struct CpuExpertCost {
  double seconds_1 = 0;  // one expert, one token
  double seconds_8 = 0;  // one expert, eight tokens
  double estimate(int tokens) const;
};

// Times gate, up, SwiGLU and down of expert 0 of the first MoE layer on `cpu`
// (best of `repeats`). Throws std::invalid_argument for a store without experts.
CpuExpertCost measureCpuExpertCost(Backend& cpu, const HostExpertStore& store, int repeats = 3);

}  // namespace moe
