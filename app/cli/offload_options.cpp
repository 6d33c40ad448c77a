#include "app/cli/offload_options.h"

#include <cstdio>

namespace moe::cli {

std::set<std::string> offloadValueOptions() {
  return {"--policy", "--cache-share", "--cache-mb", "--link-gbps", "--eviction"};
}

std::set<std::string> offloadFlags() {
  return {"--paced",         "--no-prefetch",     "--no-chunking",  "--no-preemption",
          "--no-reordering", "--no-cpu-fallback", "--no-streaming", "--mapped-decode"};
}

ProactiveSwitches proactiveSwitches(const Args& args) {
  ProactiveSwitches s;
  s.prefetch = !args.flag("--no-prefetch");
  s.chunking = !args.flag("--no-chunking");
  s.early_preemption = !args.flag("--no-preemption");
  s.reordering = !args.flag("--no-reordering");
  s.cpu_fallback = !args.flag("--no-cpu-fallback");
  s.prefill_streaming = !args.flag("--no-streaming");
  return s;
}

BudgetSetting cacheBudgetOption(const Args& args, double share) {
  const double s = args.doubleOr("--cache-share", share);
  if (!(s > 0 && s <= 1)) throw UsageError("--cache-share must be in (0, 1]");
  const double mb = args.doubleOr("--cache-mb", 0);
  if (mb < 0) throw UsageError("--cache-mb must be >= 0");
  return mb > 0 ? BudgetSetting::cacheBytes(static_cast<uint64_t>(mb * 1e6)) : BudgetSetting::cacheShare(s);
}

int cacheSlotsFor(const BudgetSetting& budget, const Model& model, OffloadPolicy policy) {
  const LoadPlan plan =
      resolveLoadPlan({budget, policy, model.config().n_ctx_train, false}, shapeOf(model), {});
  if (!plan.loads()) throw UsageError(plan.error);
  return plan.cache_slots;
}

void applyOffloadOptions(const Args& args, SessionOptions& so) {
  try {
    so.policy = parsePolicy(args.valueOr("--policy", "resident"));
    if (auto rule = args.value("--eviction")) so.eviction = parseEviction(*rule);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  so.budget = cacheBudgetOption(args, 0.5);
  const double gbps = args.doubleOr("--link-gbps", 0);
  if (gbps < 0) throw UsageError("--link-gbps must be >= 0");
  so.link.bytes_per_second = gbps * 1e9;
  so.link.paced = args.flag("--paced");
  if (so.link.paced && gbps == 0) throw UsageError("--paced needs a simulated link (--link-gbps G)");
  so.switches = proactiveSwitches(args);
  so.mapped_decode = args.flag("--mapped-decode");
}

void printCpuDecision(const CpuDecision& d) {
  std::fprintf(stderr, "cpu-experts: layer %d expert %d, %d token(s): CPU %.3f ms vs copy %.3f ms -> %s\n",
               d.layer, d.expert, d.tokens, d.cpu_seconds * 1e3, d.copy_seconds * 1e3,
               d.on_cpu ? "CPU" : "copy");
}

void printOffloadStats(const OffloadSnapshot& m, const EngineSession& session) {
  auto pct = [&](uint64_t n) { return m.expert_uses ? 100.0 * double(n) / double(m.expert_uses) : 0.0; };
  std::fprintf(stderr, "offload: policy %s, %d cache slots", policyName(session.policy()),
               session.cacheSlots());
  if (session.policy() == OffloadPolicy::kResident) {
    std::fprintf(stderr, " (experts in place: nothing cached or copied)\n");
    return;
  }
  std::fprintf(
      stderr,
      ", link %.2f GB/s%s\n"
      "  expert uses %llu: ready %.1f%% (prefetched %.1f%%), in flight %.1f%%, missed %.1f%%\n"
      "  misses served: streamed %llu, CPU-computed %llu (of %llu decisions), no slot %llu\n"
      "  moved %.3f GB in %llu chunks (dropped %llu, promoted %llu); copy busy %.3f s, "
      "link clock %.3f s\n"
      "  compute blocked %.3f s: %llu host waits, %llu device waits (stalled %.3f s); held slots %llu\n"
      "  prefill %llu tokens in %.3f s; decode %llu tokens in %.3f s\n",
      m.link_bytes_per_second / 1e9, m.link_seconds > 0 ? " (simulated)" : " (measured memcpy)",
      (unsigned long long)m.expert_uses, pct(m.ready_hits), pct(m.prefetch_hits), pct(m.inflight_hits),
      pct(m.misses), (unsigned long long)m.streamed, (unsigned long long)m.cpu_computed,
      (unsigned long long)m.cpu_decisions, (unsigned long long)m.unavailable, m.bytes_h2d / 1e9,
      (unsigned long long)m.chunks_copied, (unsigned long long)m.chunks_dropped,
      (unsigned long long)m.chunks_promoted, m.copy_busy_ns / 1e9, m.link_seconds, m.blockedSeconds(),
      (unsigned long long)m.waits, (unsigned long long)m.device_waits, m.device_stall_ns / 1e9,
      (unsigned long long)m.held_slots, (unsigned long long)m.prefill_tokens, m.prefill_ns / 1e9,
      (unsigned long long)m.decode_tokens, m.decode_ns / 1e9);
  if (m.pred_truth > 0)
    std::fprintf(stderr,
                 "  predictor %s: Accuracy %.3f, FetchRate %.3f, GoodPred %.3f (%llu experts predicted; "
                 "on its own thread: %llu results too late, %llu requests replaced)\n",
                 session.offload().predictorName().c_str(), m.accuracy(), m.fetchRate(), m.goodPred(),
                 (unsigned long long)m.predicted, (unsigned long long)m.predictions_late,
                 (unsigned long long)m.predictions_replaced);
}

}  // namespace moe::cli
