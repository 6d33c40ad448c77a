#include "offload/routing/prefetch_sim.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <vector>

namespace moe {

namespace {

// The prediction at `layer`'s input; its guesses are kept in guessed[target].
void prefetch(SlotTable& table, ExpertPredictor& predictor, int layer, int n_layer,
              const ProactiveSimOptions& o, ProactiveSimResult& out, std::vector<std::vector<int>>& guessed) {
  int target = layer + o.stride;
  if (target >= n_layer) {
    if (!predictor.predictsNextToken()) return;
    target -= n_layer;
  }
  if (target < 0 || target >= n_layer) return;
  std::vector<ExpertGuess> guesses =
      predictor.predictScored(layer, target, {}, 1, o.hints ? 1 << 20 : o.budget);
  if (o.hints) {
    for (const ExpertGuess& g : guesses) table.reuse().hint(target, g.expert, g.probability);
    if (int(guesses.size()) > o.budget) guesses.resize(size_t(o.budget));
  }
  for (const ExpertGuess& g : guesses) {
    guessed[size_t(target)].push_back(g.expert);
    if (const int slot = table.find(target, g.expert); slot >= 0) {
      table.touch(slot);
      continue;
    }
    const int slot =
        table.reserve(target, g.expert, /*predicted=*/true, table.admissionBound(g.probability, o.admission));
    if (slot < 0) {
      ++out.prefetch_skipped;
      continue;
    }
    table.markReady(slot);
    ++out.prefetch_copies;
  }
}

}  // namespace

ProactiveSimResult simulateProactive(std::span<const ExpertRequest> requests, int n_layer, int slots,
                                     ExpertPredictor* predictor, const ProactiveSimOptions& o) {
  if (n_layer <= 0 || slots <= 0)
    throw std::invalid_argument("simulated cache: need layers > 0 and slots > 0");
  SlotTable table(slots, n_layer, 1);
  table.setEviction(o.eviction);
  table.reuse() = ReuseModel(o.reuse_horizon);
  ProactiveSimResult out;
  std::vector<std::vector<int>> guessed(
      static_cast<size_t>(n_layer));  // [layer] the latest prediction's experts
  for (const auto& r : requests) {
    if (r.layer < 0 || r.layer >= n_layer) throw std::invalid_argument("simulated cache: layer out of range");
    if (predictor) prefetch(table, *predictor, r.layer, n_layer, o, out, guessed);
    if (std::vector<int>& g = guessed[size_t(r.layer)]; !g.empty()) {
      for (int e : r.experts) out.named += std::find(g.begin(), g.end(), e) != g.end();
      out.predicted_uses += r.experts.size();
      g.clear();
    }
    // The gate, as TransferWorker::pushPrecise: count it, pin its cached experts,
    // then each expert in order: a hit is touched, a miss takes a slot.
    table.setComputingLayer(r.layer);
    table.countGate(r.layer, r.experts);
    for (int e : r.experts)
      if (const int slot = table.find(r.layer, e); slot >= 0) table.pin(slot);
    for (int e : r.experts) {
      ++out.uses;
      if (const int slot = table.find(r.layer, e); slot >= 0) {
        ++out.ready;
        if (table.at(slot).predicted) ++out.prefetch_ready;
        table.touch(slot);
        continue;
      }
      const int slot =
          table.reserve(r.layer, e, /*predicted=*/false,
                        o.bypass ? table.worthOf(r.layer, e) : std::numeric_limits<double>::infinity());
      if (slot < 0) continue;  // streamed
      table.markReady(slot);
      table.pin(slot);
      ++out.demand_copies;
    }
    table.unpinAll();
    table.setComputingLayer(-1);
    if (predictor) predictor->observe(RoutingEvent{r.layer, 1, r.experts, {}});
  }
  return out;
}

}  // namespace moe
