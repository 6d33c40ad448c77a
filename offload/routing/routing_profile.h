// What a real model's routing looks like, in a few numbers per MoE layer, and a
// routing process that follows them, for synthetic models that have no trace
// (`gen-model --routing realistic`). Three properties decide what an expert cache
// and a predictor achieve, and uniform random routing has none of them:
//  - popularity: a layer's most used experts take most of its selections;
//  - stickiness: a token keeps many of the experts the tokens just before it chose,
//    and a reply keeps coming back to a working set of its own;
//  - layer to layer: an expert chosen at one layer makes a "partner" at the next
//    layer likely.
// measureRoutingProfile reads them off a recorded trace; synthesizeRouting draws
// a trace of any routing shape whose figures match the profile's (the process's
// strengths per layer and its popularity are fitted by simulation to the target
// shape), replayed like a recorded one (trace_routing.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "offload/routing/routing_trace.h"

namespace moe {

struct LayerRoutingProfile {
  // Share of the layer's selections that went to its r-th most used expert,
  // r = 0 .. n_expert - 1: non-increasing, summing to 1.
  std::vector<double> popularity;
  // Of a token's experts at this layer, the share the token before chose too.
  double adjacent_overlap = 0;
  // Of a token's experts at this layer, the share one of the recentWindow tokens
  // before it chose (about what a per-layer LRU cache of half the layer's experts hits).
  double recent_reuse = 0;
  // The same for the sessionWindow tokens before it (a reply keeps coming back to a
  // working set of its own).
  double session_reuse = 0;
  // Of a token's experts at this layer, the share that are the partner (the expert
  // most often chosen with it, over the trace) of an expert the same token chose at
  // the layer before. 0 for the first layer.
  double layer_follow = 0;
};

// The windows, in tokens, for n experts top-k: as many selections as half the
// layer's experts (recent) and as twice them (session); for gpt-oss-20b's 32 top-4,
// 4 and 16 tokens. Measured so, the figures carry over from one shape to another.
inline int recentWindow(int n_expert, int k) { return n_expert / (2 * k) > 1 ? n_expert / (2 * k) : 1; }
inline int sessionWindow(int n_expert, int k) { return 2 * n_expert / k > 2 ? 2 * n_expert / k : 2; }

struct RoutingProfile {
  std::string source;  // the trace it was measured on
  int n_expert = 0, k = 0;
  std::vector<LayerRoutingProfile> layers;  // one per MoE layer
};

// The profile of a trace (at least two tokens). Throws RoutingTraceError otherwise.
RoutingProfile measureRoutingProfile(const RoutingTrace& trace);

// A profile as text (one line per layer) and back; parse errors name the line.
std::string formatRoutingProfile(const RoutingProfile& profile);
RoutingProfile parseRoutingProfile(std::string_view text);

// The profile moechat ships: gpt-oss-20b's routing measured on the held-in
// fingerprinting traces (offload/routing/gpt_oss_20b_profile.inc).
const RoutingProfile& shippedRoutingProfile();

// n_tokens tokens of routing for n_layer MoE layers x n_expert experts, top-k,
// following `profile` (its layers and popularity curve resampled to the target
// shape), the same for the same seed. Throws std::invalid_argument for a shape
// that cannot be drawn (k > n_expert, no layers, no tokens).
RoutingTrace synthesizeRouting(const RoutingProfile& profile, int n_layer, int n_expert, int k, int n_tokens,
                               uint64_t seed);

}  // namespace moe
