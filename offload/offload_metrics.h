// Offload counters: atomic, cheap to bump from the worker and compute threads,
// polled (e.g. by the UI 4-10 times a second) through snapshot(). The exact
// meaning of every field is in docs/offload.md, section "Counters".
#pragma once

#include <atomic>
#include <cstdint>

namespace moe {

// A plain, trivially copyable value: safe to pass between threads by copy.
struct OffloadSnapshot {
  // Gate decisions: every expert_use is exactly one of ready_hits, inflight_hits, misses.
  uint64_t expert_uses = 0;    // experts the gates chose (pushPrecise)
  uint64_t ready_hits = 0;     // READY at the gate
  uint64_t prefetch_hits = 0;  // READY at the gate and brought in by a prediction
  uint64_t inflight_hits = 0;  // LOADING at the gate
  uint64_t misses = 0;         // not in the cache at the gate
  // How the misses were served: copied into a cache slot (the rest), or
  uint64_t unavailable = 0;   // no slot and no staging: computed from host memory (forced)
  uint64_t cpu_computed = 0;  // computed from host memory because that was predicted sooner (cpu-experts)
  uint64_t streamed = 0;  // copied through a staging slot and dropped after use (prefill streaming, static)
  uint64_t host_read_bytes = 0;  // misses the device read in place from host memory (mapped decode)
  uint64_t cpu_decisions = 0;    // misses the CPU-vs-copy rule decided (cpu_computed of them went to the CPU)
  // The link.
  uint64_t bytes_h2d = 0;            // bytes copied host -> device
  uint64_t chunks_copied = 0;        // chunks copied (a whole-expert task counts kChunks)
  uint64_t chunks_dropped = 0;       // queued low chunks discarded by early preemption
  uint64_t chunks_promoted = 0;      // queued low chunks re-queued high by early preemption
  uint64_t prefetch_skipped = 0;     // predicted experts skipped: no evictable slot
  uint64_t copy_busy_ns = 0;         // wall time with a copy in flight (issued, not yet noted complete)
  double link_seconds = 0;           // the simulated link's clock: bytes / link bandwidth (0 without one)
  double link_bytes_per_second = 0;  // the link bandwidth decisions use (simulated, or measured at start)
  // The compute side.
  uint64_t waits = 0;            // host waits for an expert (READY, or with device waits: its copies issued)
  uint64_t blocked_ns = 0;       // compute-thread time spent in those waits
  uint64_t device_waits = 0;     // experts whose copies the device waited for (CopyWait), not the host
  uint64_t device_stall_ns = 0;  // time the device stood still in those waits (0 on the CPU path)
  uint64_t prefill_tokens = 0, prefill_ns = 0;  // prompt tokens computed, and their forward time
  uint64_t decode_tokens = 0, decode_ns = 0;    // decode steps, and their forward time
  // The active predictor (ProMoE section 4.1), over layers that had a prediction.
  uint64_t predicted = 0;             // experts the predictor named (all pushes)
  uint64_t predictions_late = 0;      // async: predictions dropped because their target's gate had run
  uint64_t predictions_replaced = 0;  // async: requests replaced unpredicted by a newer one
  uint64_t pred_truth = 0;            // experts the gate then chose in predicted layers
  uint64_t pred_correct = 0;          // of those, named by the prediction
  uint64_t pred_timely = 0;           // of those, READY at the gate
  uint64_t held_slots = 0;            // slots the static policy holds (its most-used experts)

  double hitRate() const { return expert_uses ? double(ready_hits) / expert_uses : 0.0; }
  // Compute time lost waiting for experts: the host's waits plus the device's stalls.
  double blockedSeconds() const { return double(blocked_ns + device_stall_ns) / 1e9; }
  // The link's busy time: the simulated clock when there is one, else the measured span with copies in
  // flight.
  double linkBusySeconds() const { return link_seconds > 0 ? link_seconds : double(copy_busy_ns) / 1e9; }
  // Accuracy = correct / truth; FetchRate = timely / correct; GoodPred = their product = timely / truth.
  double accuracy() const { return pred_truth ? double(pred_correct) / pred_truth : 0.0; }
  double fetchRate() const { return pred_correct ? double(pred_timely) / pred_correct : 0.0; }
  double goodPred() const { return accuracy() * fetchRate(); }
};

struct OffloadMetrics {
  std::atomic<uint64_t> expert_uses{0}, ready_hits{0}, prefetch_hits{0}, inflight_hits{0}, misses{0},
      unavailable{0}, cpu_computed{0}, streamed{0}, host_read_bytes{0}, cpu_decisions{0}, bytes_h2d{0},
      chunks_copied{0}, chunks_dropped{0}, chunks_promoted{0}, prefetch_skipped{0}, copy_busy_ns{0}, waits{0},
      blocked_ns{0}, device_waits{0}, prefill_tokens{0}, prefill_ns{0}, decode_tokens{0}, decode_ns{0},
      predicted{0}, pred_truth{0}, pred_correct{0}, pred_timely{0}, held_slots{0}, predictions_late{0},
      predictions_replaced{0};
  std::atomic<double> link_bytes_per_second{0.0};

  // After a generation: the session adds its prefill and decode figures.
  void addGeneration(uint64_t prompt_tokens, double prefill_s, uint64_t decode_steps, double decode_s) {
    prefill_tokens.fetch_add(prompt_tokens, std::memory_order_relaxed);
    prefill_ns.fetch_add(static_cast<uint64_t>(prefill_s * 1e9), std::memory_order_relaxed);
    decode_tokens.fetch_add(decode_steps, std::memory_order_relaxed);
    decode_ns.fetch_add(static_cast<uint64_t>(decode_s * 1e9), std::memory_order_relaxed);
  }

  OffloadSnapshot snapshot() const {
    auto ld = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    OffloadSnapshot s;
    s.expert_uses = ld(expert_uses);
    s.ready_hits = ld(ready_hits);
    s.prefetch_hits = ld(prefetch_hits);
    s.inflight_hits = ld(inflight_hits);
    s.misses = ld(misses);
    s.unavailable = ld(unavailable);
    s.cpu_computed = ld(cpu_computed);
    s.streamed = ld(streamed);
    s.host_read_bytes = ld(host_read_bytes);
    s.cpu_decisions = ld(cpu_decisions);
    s.bytes_h2d = ld(bytes_h2d);
    s.chunks_copied = ld(chunks_copied);
    s.chunks_dropped = ld(chunks_dropped);
    s.chunks_promoted = ld(chunks_promoted);
    s.prefetch_skipped = ld(prefetch_skipped);
    s.copy_busy_ns = ld(copy_busy_ns);
    s.link_bytes_per_second = link_bytes_per_second.load(std::memory_order_relaxed);
    s.waits = ld(waits);
    s.blocked_ns = ld(blocked_ns);
    s.device_waits = ld(device_waits);
    s.prefill_tokens = ld(prefill_tokens);
    s.prefill_ns = ld(prefill_ns);
    s.decode_tokens = ld(decode_tokens);
    s.decode_ns = ld(decode_ns);
    s.predicted = ld(predicted);
    s.pred_truth = ld(pred_truth);
    s.pred_correct = ld(pred_correct);
    s.pred_timely = ld(pred_timely);
    s.held_slots = ld(held_slots);
    s.predictions_late = ld(predictions_late);
    s.predictions_replaced = ld(predictions_replaced);
    return s;
  }
};

}  // namespace moe
