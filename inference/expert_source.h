// The one narrow door between the MoE block and wherever expert weights live.
// The engine-core implementation (offload/resident_expert_source.h) hands out the
// experts in place in the model file; the offload engine replaces it with a GPU
// cache fed by prefetching, and may reorder the experts (ready ones first).
#pragma once

#include <span>
#include <vector>

#include "inference/weight.h"

namespace moe {

// One routed expert of one layer: FFN(x) = down · (silu(gate · x) * (up · x)).
struct ExpertWeights {
  WeightView gate;  // rows n_ff_exp, cols n_embd
  WeightView up;    // rows n_ff_exp, cols n_embd
  WeightView down;  // rows n_embd, cols n_ff_exp
};

struct ExpertRef {
  int expert = -1;
  ExpertWeights weights;
  // Host memory the source chose to compute on the host CPU (the cpu-experts
  // rule): a Transformer with a host backend computes it there while the device
  // computes the others; without one, on its own backend like any expert.
  bool on_host = false;
  // Its bytes are where `weights` points when acquire returns (a cache hit, or the
  // host copy): waitFor has nothing to wait for, so the MoE block may compute it
  // together with its neighbours in the order that are ready too.
  bool ready = false;
};

// Routing decision of one MoE layer for one batch: what the gate chose per token.
struct RoutingEvent {
  int layer = 0;
  int n_tokens = 0;
  std::span<const int> experts;    // [n_tokens][n_expert_used]
  std::span<const float> weights;  // [n_tokens][n_expert_used]
};

class ExpertSource {
 public:
  virtual ~ExpertSource() = default;

  // Layer `layer` starts; hidden is its input, [n_tokens][n_embd] on the host (empty
  // when wantsLayerInput() is false). A predictor may use it to prefetch later
  // layers' experts. Default: ignored.
  virtual void onLayerInput(int layer, std::span<const float> hidden, int n_tokens) {
    (void)layer, (void)hidden, (void)n_tokens;
  }

  // Whether onLayerInput reads `hidden`: when not, the MoE block saves the copy of
  // the layer's input to the host (a device round trip per layer).
  virtual bool wantsLayerInput() const { return true; }

  // The gate of `layer` has chosen, per token (before acquire). A policy that keeps
  // routing statistics counts here; a wrapping source passes it on. Default: ignored.
  virtual void onRouting(const RoutingEvent& ev) { (void)ev; }

  // The gate of `layer` chose `experts` (unique ids, any order). Returns the same
  // experts in the order the MoE block must compute them; their weights stay
  // valid until release(layer).
  virtual std::vector<ExpertRef> acquire(int layer, std::span<const int> experts) = 0;
  // Called just before the MoE block computes `ref` (in the acquired order): a
  // source whose copies run in the background waits here, per expert, so that
  // computing expert i overlaps copying expert i+1. Default: nothing to wait for.
  virtual void waitFor(int layer, const ExpertRef& ref) { (void)layer, (void)ref; }
  // Whether every acquired expert is ready at once and stays valid until
  // release(layer), so the MoE block may compute several together (fewer, larger
  // parallel loops; the same results). Otherwise it computes each expert right
  // after its waitFor, as a cache that reuses slots within a layer needs.
  virtual bool allReady() const { return false; }
  // Every expert of `layer`, indexed by id, when the source holds all of them in
  // the compute backend's memory for the whole run and needs no word of the
  // routing: the MoE block may then let a backend that computes it route and pick
  // the experts itself (no onRouting, acquire, waitFor or release for that layer),
  // so the host never waits to learn the choice. Empty (default): the host sees
  // each routing.
  virtual std::span<const ExpertWeights> everyExpert(int layer) const {
    (void)layer;
    return {};
  }
  // A decode step on a backend that computes the MoE block, without the host waiting
  // to learn the routing: every expert of `layer` where the backend can read it now,
  // a cached one in its slot, any other in place in host memory (pinned: the kernels
  // read it over the link). The backend routes and picks on the device; the source
  // keeps those slots until mappedLayerQueued(layer), called once the layer's kernels
  // are queued, and learns the routing after the step (routedOnDevice, in layer
  // order). Empty (default): not offered; the layer goes through acquire.
  virtual std::span<const ExpertWeights> mappedExperts(int layer) {
    (void)layer;
    return {};
  }
  virtual void mappedLayerQueued(int layer) { (void)layer; }
  virtual void routedOnDevice(const RoutingEvent& ev) { (void)ev; }
  virtual void release(int layer) = 0;
};

}  // namespace moe
