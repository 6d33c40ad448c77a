// A proactive cache simulated on a sequence of gate requests: the offload path's
// slot table (offload/slot_table.h) and a predictor (offload/expert_predictor.h),
// stepped as the engine steps them, with no copies and no clock. At each layer's
// input the predictor names layer + stride's experts (the next token's first
// layers past the last one, when it can) and each guess not cached takes a slot
// as TransferWorker::pushPredicted would (its admission included); at the gate the
// chosen experts are hits or misses, and the misses take slots as pushPrecise
// would. A prefetch lands before its gate: the case of a link faster than the
// compute between the prediction and the gate (a full-size expert crosses a
// 25 GB/s link in about a tenth of a CPU layer's compute), so what this measures
// is the policy's choices, not its timing.
#pragma once

#include <cstdint>
#include <span>

#include "offload/expert_predictor.h"
#include "offload/routing/demand_cache.h"
#include "offload/slot_table.h"

namespace moe {

struct ProactiveSimOptions {
  int stride = 2;        // at layer L predict L + stride
  int budget = 8;        // guesses per prediction
  double admission = 0;  // PrefetchOptions::admission
  Eviction eviction = Eviction::kSharedFrequency;
  int reuse_horizon = 1;  // kSharedReuse: ReuseModel's horizon
  // kSharedReuse: the prediction's probabilities for all its target's experts become
  // their reuse values until the target's gate (ReuseModel::hint).
  bool hints = false;
  // A miss is streamed, not cached, when its expert is worth less than the victim.
  bool bypass = false;
};

struct ProactiveSimResult {
  uint64_t uses = 0;              // experts the gates chose
  uint64_t ready = 0;             // cached at their gate
  uint64_t prefetch_ready = 0;    // of those, in a slot a prediction filled
  uint64_t demand_copies = 0;     // misses copied into a slot
  uint64_t prefetch_copies = 0;   // predictions copied into a slot
  uint64_t prefetch_skipped = 0;  // predictions not admitted (or no slot)
  uint64_t named = 0;             // experts chosen that the layer's latest prediction named
  uint64_t predicted_uses = 0;    // experts chosen at gates that had a prediction
  uint64_t copies() const { return demand_copies + prefetch_copies; }
  double readyRate() const { return uses ? double(ready) / double(uses) : 0.0; }
  double accuracy() const { return predicted_uses ? double(named) / double(predicted_uses) : 0.0; }
};

// `predictor` may be null: the demand cache alone (as simulateSlotTable). It
// observes every gate, in order.
ProactiveSimResult simulateProactive(std::span<const ExpertRequest> requests, int n_layer, int slots,
                                     ExpertPredictor* predictor, const ProactiveSimOptions& options);

}  // namespace moe
