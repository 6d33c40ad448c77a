// The figures of the live performance strip, derived from two successive
// EngineCounters polls: rates over the poll interval, and the current reply's
// prefill/decode speeds and TTFT. Qt-free so the arithmetic is tested alone.
#pragma once

#include "app/core/chat_engine.h"

namespace moe {

struct PerfFigures {
  // Expert lookups at the gate in the interval, split by where the expert was.
  uint64_t expert_uses = 0;
  double cached_share = 0;        // READY and not brought in by a prediction
  double prefetched_share = 0;    // READY thanks to a prediction
  double inflight_share = 0;      // still loading at the gate
  double missed_share = 0;        // not in the cache at the gate
  bool experts_resident = false;  // no offloading: all experts in fast memory
  double h2d_bytes_per_second = 0;
  double link_share = 0;     // of the measured/simulated link; 0 when unknown
  double prefill_tps = 0;    // current or last reply, 0 until prefill is done
  double decode_tps = 0;     // current or last reply
  double ttft_seconds = -1;  // -1: no token yet
  double blocked_share = 0;  // of the interval spent waiting for experts
  // The active predictor over the interval (ProMoE's metrics; docs/offload.md).
  uint64_t predicted_truth = 0;  // experts the gates chose in layers that had a prediction
  double pred_accuracy = 0;      // named by the prediction
  double pred_good = 0;          // GoodPred: named and READY in time
  bool generating = false;
  // Memory, as of the poll: the GPU's in use and its size (0: computing on the CPU),
  // this process's resident RAM.
  uint64_t vram_used_bytes = 0, vram_total_bytes = 0;
  uint64_t ram_resident_bytes = 0;
};

PerfFigures derivePerfFigures(const EngineCounters& prev, const EngineCounters& now, double interval_seconds);

}  // namespace moe
