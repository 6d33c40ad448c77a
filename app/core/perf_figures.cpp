#include "app/core/perf_figures.h"

namespace moe {
namespace {

uint64_t delta(uint64_t now, uint64_t prev) { return now >= prev ? now - prev : now; }

}  // namespace

PerfFigures derivePerfFigures(const EngineCounters& prev, const EngineCounters& now,
                              double interval_seconds) {
  PerfFigures f;
  f.generating = now.generating;
  f.experts_resident = now.experts_resident;

  const auto& a = prev.offload;
  const auto& b = now.offload;
  f.expert_uses = delta(b.expert_uses, a.expert_uses);
  if (f.expert_uses > 0) {
    const double uses = static_cast<double>(f.expert_uses);
    const uint64_t ready = delta(b.ready_hits, a.ready_hits);
    const uint64_t prefetched = delta(b.prefetch_hits, a.prefetch_hits);
    f.prefetched_share = prefetched / uses;
    f.cached_share = (ready >= prefetched ? ready - prefetched : 0) / uses;
    f.inflight_share = delta(b.inflight_hits, a.inflight_hits) / uses;
    f.missed_share = delta(b.misses, a.misses) / uses;
  }
  f.predicted_truth = delta(b.pred_truth, a.pred_truth);
  if (f.predicted_truth > 0) {
    f.pred_accuracy = static_cast<double>(delta(b.pred_correct, a.pred_correct)) / f.predicted_truth;
    f.pred_good = static_cast<double>(delta(b.pred_timely, a.pred_timely)) / f.predicted_truth;
  }
  if (interval_seconds > 0) {
    f.h2d_bytes_per_second = delta(b.bytes_h2d, a.bytes_h2d) / interval_seconds;
    const double blocked = now.blocked_seconds - prev.blocked_seconds;
    if (blocked > 0) f.blocked_share = blocked / interval_seconds;
  }
  if (now.link_bytes_per_second > 0) f.link_share = f.h2d_bytes_per_second / now.link_bytes_per_second;

  if (now.prefill_seconds > 0 && now.prefilled_tokens > 0)
    f.prefill_tps = now.prefilled_tokens / now.prefill_seconds;
  // decode_seconds runs from the first sampled token, so it covers the tokens after it.
  if (now.decode_seconds > 0 && now.generated_tokens > 1)
    f.decode_tps = (now.generated_tokens - 1) / now.decode_seconds;
  f.ttft_seconds = now.ttft_seconds;
  f.vram_used_bytes = now.vram_used_bytes;
  f.vram_total_bytes = now.vram_total_bytes;
  f.ram_resident_bytes = now.ram_resident_bytes;
  return f;
}

}  // namespace moe
