// Expert choices given from outside the model, such as a recorded trace of a
// real model's routing (offload/routing/trace_routing.h): the MoE block still
// runs its router, so its cost is paid, then computes the experts named here.
#pragma once

#include <span>

namespace moe {

class RoutingReplay {
 public:
  virtual ~RoutingReplay() = default;
  // The choice of layer `layer` for the tokens at positions first_pos,
  // first_pos + 1, ...: ids and weights [n_tokens][k] (k = the model's
  // n_expert_used, each id below its n_expert).
  virtual void route(int layer, int first_pos, int n_tokens, std::span<int> ids,
                     std::span<float> weights) const = 0;
};

}  // namespace moe
