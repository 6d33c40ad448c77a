#include "app/cli/bench_report.h"

#include <cstdio>

namespace moe::cli {
namespace {

// The row named `name`, or (--eviction with several rules) `name` with its policy's
// own rule as suffix: the references the other rows are compared with.
const BenchRow* findRow(const std::vector<BenchRow>& rows, const std::string& name) {
  for (const auto& r : rows)
    if (r.name == name || r.name == name + "/" + evictionName(policyParts(r.policy, r.switches).eviction))
      return &r;
  return nullptr;
}

Eviction evictionOf(const BenchRow& r) {
  return r.eviction.value_or(policyParts(r.policy, r.switches).eviction);
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

std::string jsonEscaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}
double logitsBytesPerDecodeToken(const BenchRow& r) {
  return r.gen.decode_steps > 0 ? double(r.gen.decode_logits_bytes) / r.gen.decode_steps : 0.0;
}
double pct(uint64_t part, uint64_t whole) { return whole ? 100.0 * double(part) / double(whole) : 0.0; }
double boundSeconds(const BenchContext& c) { return ratio(double(c.bound_bytes), c.link_bytes_per_second); }

// The predictor's gain over plain LRU at the same slots: the share of expert uses
// READY at the gate, proactive minus reactive-lru (percentage points).
bool predictorGain(const std::vector<BenchRow>& rows, double& lru, double& pro) {
  const BenchRow* a = findRow(rows, "reactive-lru");
  const BenchRow* b = findRow(rows, "proactive");
  if (!a || !b) return false;
  lru = 100.0 * a->m.hitRate();
  pro = 100.0 * b->m.hitRate();
  return true;
}

constexpr const char kStandinTimingsNote[] =
    "computed by the CPU stand-in of the CUDA runtime: times and rates say nothing about a GPU; the "
    "device_work counts (kernel launches, graph launches, host syncs, bytes copied) are what the CUDA "
    "code asked of the device";

void printWorkPerToken(const CudaWorkCounters& w, int tokens) {
  const double n = tokens > 0 ? tokens : 1;
  std::printf(
      "{\"kernel_launches\": %.3f, \"host_syncs\": %.3f, \"stalling_host_syncs\": %.3f, \"stream_syncs\": "
      "%.3f, \"bytes_h2d\": %.1f, \"bytes_d2h\": %.1f, \"graph_launches\": %.3f}",
      double(w.kernel_launches) / n, double(w.host_syncs) / n, double(w.stalling_host_syncs) / n,
      double(w.stream_syncs) / n, double(w.bytes_h2d) / n, double(w.bytes_d2h) / n,
      double(w.graph_launches) / n);
}

// One line: each row's host waits per decode token, and how many of them stalled the
// device (nothing queued behind them: it idles until the host queues more).
void printWaitsPerDecodeToken(const std::vector<BenchRow>& rows) {
  bool any = false;
  for (const auto& r : rows) {
    if (!r.decode_work || r.gen.decode_steps <= 0) continue;
    const double n = r.gen.decode_steps;
    std::printf("%s %s %.2f/%.2f",
                any ? "," : "host waits per decode token/of them stalling the device:", r.name.c_str(),
                double(r.decode_work->host_syncs) / n, double(r.decode_work->stalling_host_syncs) / n);
    any = true;
  }
  if (any) std::printf("\n");
}

}  // namespace

void printBenchTable(const std::vector<BenchRow>& rows, const BenchContext& ctx) {
  const BenchRow* lru = findRow(rows, "reactive-lru");
  std::printf("%-24s %8s %9s %8s %6s %9s %9s %6s %5s %8s %8s %8s %9s %8s %6s %7s %7s %7s\n", "policy",
              "TTFT s", "prefill/s", "decode/s", "ready%", "prefetch%", "inflight%", "miss%", "host",
              "streamed", "GB moved", "blocked", "pred-ok%", "link s", "xbound", "dec/LRU", "TTFT/LRU",
              "xBelady");
  for (const auto& r : rows) {
    const auto& m = r.m;
    const bool cached = r.policy != OffloadPolicy::kResident;
    std::printf("%-24s %8.3f %9.1f %8.2f ", r.name.c_str(), r.gen.ttft_seconds,
                r.gen.prefillTokensPerSecond(), r.gen.decodeTokensPerSecond());
    if (cached)
      std::printf("%6.1f %9.1f %9.1f %6.1f %5llu %8llu %8.3f %8.3f %9.1f %8.4f %6.2f ",
                  pct(m.ready_hits, m.expert_uses), pct(m.prefetch_hits, m.expert_uses),
                  pct(m.inflight_hits, m.expert_uses), pct(m.misses, m.expert_uses),
                  (unsigned long long)(m.cpu_computed + m.unavailable), (unsigned long long)m.streamed,
                  m.bytes_h2d / 1e9, m.blockedSeconds(), 100.0 * m.goodPred(), m.linkBusySeconds(),
                  ratio(m.linkBusySeconds(), boundSeconds(ctx)));
    else
      std::printf("%6s %9s %9s %6s %5s %8s %8s %8s %9s %8s %6s ", "-", "-", "-", "-", "-", "-", "0", "-", "-",
                  "-", "-");
    std::printf("%6.2fx %6.2fx ",
                lru ? ratio(r.gen.decodeTokensPerSecond(), lru->gen.decodeTokensPerSecond()) : 0.0,
                lru ? ratio(r.gen.ttft_seconds, lru->gen.ttft_seconds) : 0.0);
    if (cached && ctx.belady)
      std::printf("%6.2fx\n", ratio(m.hitRate(), ctx.belady->hitRate()));
    else
      std::printf("%7s\n", "-");
  }
  std::printf(
      "columns (shares of the experts used): ready at the gate; of them prefetched by the predictor;\n"
      "  copy in flight at the gate; missed. host: computed from host memory (the CPU rule, or no slot);\n"
      "  streamed: through the staging slots; pred-ok: predicted and ready in time (ProMoE's GoodPred);\n"
      "  blocked: seconds of compute spent waiting for copies; xbound: link time over the bound below;\n"
      "  xBelady: ready at the gate over the hit rate of Belady's clairvoyant demand cache below\n");
  std::printf("routing: %s\n", ctx.routing.c_str());
  if (ctx.belady && ctx.lru_per_layer)
    std::printf(
        "simulated on the same gates at %d slots: Belady (clairvoyant demand cache) hits %.1f%%, moves %.3f "
        "GB; "
        "LRU per layer hits %.1f%%, moves %.3f GB\n",
        ctx.cache_slots, 100 * ctx.belady->hitRate(), ctx.belady->misses() * double(ctx.expert_bytes) / 1e9,
        100 * ctx.lru_per_layer->hitRate(), ctx.lru_per_layer->misses() * double(ctx.expert_bytes) / 1e9);
  std::printf(
      "bound: %.3f GB (each distinct expert the run uses crossing once) = %.4f s over the %.1f GB/s link%s\n",
      ctx.bound_bytes / 1e9, boundSeconds(ctx), ctx.link_bytes_per_second / 1e9,
      ctx.link == "measured" ? " (measured pinned host->device bandwidth)"
      : ctx.paced            ? " (paced: copies take that long in wall time)"
                             : " (virtual clock)");
  double lru_hit = 0, pro_hit = 0;
  if (predictorGain(rows, lru_hit, pro_hit))
    std::printf(
        "predictor (%s) gain over plain LRU at %d slots: ready at the gate %.1f%% vs %.1f%% (%+.1f points)\n",
        ctx.predictor.c_str(), ctx.cache_slots, pro_hit, lru_hit, pro_hit - lru_hit);
  std::printf("CPU cost of one expert (1 token): %.3f ms; all policies generated identical tokens\n",
              ctx.cpu_expert_ms);
  std::printf("decoding: %s\n", ctx.decoding.c_str());
  for (const auto& r : rows)
    if (r.gen.decode_steps > 0) {
      std::printf("logits read by the sampler per decode token: %.0f bytes (%s)\n",
                  logitsBytesPerDecodeToken(r),
                  r.gen.sampled_on_backend ? "reduced on the device: the argmax or the best top-k + 1"
                                           : "the whole row");
      break;
    }
  printWaitsPerDecodeToken(rows);
  if (!ctx.timings_meaningful) std::printf("note: %s\n", kStandinTimingsNote);
}

void printBenchJson(const std::vector<BenchRow>& rows, const BenchContext& ctx) {
  const BenchRow* lru = findRow(rows, "reactive-lru");
  std::printf(
      "{\"model\": \"%s\", \"compute\": \"%s\", \"threads\": %d, \"cache_slots\": %d, \"total_experts\": "
      "%d, "
      "\"prompt_tokens\": %d, \"decode_tokens\": %d, \"link\": \"%s\", \"link_bytes_per_second\": "
      "%.0f, "
      "\"paced\": %s, \"bound_bytes\": %llu, \"bound_seconds\": %.6f, \"cpu_expert_ms\": %.4f, "
      "\"predictor\": \"%s\", \"identical_tokens\": true, \"timings_meaningful\": %s,",
      ctx.model_name.c_str(), ctx.compute.c_str(), ctx.threads, ctx.cache_slots, ctx.total_experts,
      ctx.prompt_tokens, ctx.decode_tokens, ctx.link.c_str(), ctx.link_bytes_per_second,
      ctx.paced ? "true" : "false", (unsigned long long)ctx.bound_bytes, boundSeconds(ctx), ctx.cpu_expert_ms,
      ctx.predictor.c_str(), ctx.timings_meaningful ? "true" : "false");
  if (!ctx.timings_meaningful) std::printf(" \"timings_note\": \"%s\",", kStandinTimingsNote);
  std::printf(" \"routing\": \"%s\", \"decoding\": \"%s\",", jsonEscaped(ctx.routing).c_str(),
              jsonEscaped(ctx.decoding).c_str());
  auto simulated = [&](const char* name, const std::optional<DemandResult>& d) {
    if (!d) return;
    std::printf(" \"%s\": {\"uses\": %llu, \"hits\": %llu, \"hit_rate\": %.4f, \"bytes\": %llu},", name,
                (unsigned long long)d->uses, (unsigned long long)d->hits, d->hitRate(),
                (unsigned long long)(d->misses() * ctx.expert_bytes));
  };
  simulated("belady", ctx.belady);
  simulated("lru_per_layer_simulated", ctx.lru_per_layer);
  double lru_hit = 0, pro_hit = 0;
  if (predictorGain(rows, lru_hit, pro_hit))
    std::printf(" \"predictor_gain_points\": %.3f,", pro_hit - lru_hit);
  std::printf(" \"policies\": [");
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const auto& m = r.m;
    const auto& s = r.switches;
    std::printf(
        "%s\n  {\"policy\": \"%s\", \"eviction\": \"%s\", \"mapped_decode\": %s, \"host_read_bytes\": %llu, "
        "\"ttft_s\": %.6f, \"prefill_tok_s\": %.3f, "
        "\"decode_tok_s\": %.3f, "
        "\"expert_uses\": %llu, \"ready_hits\": %llu, \"prefetch_hits\": %llu, \"inflight_hits\": %llu, "
        "\"misses\": %llu, \"unavailable\": %llu, \"cpu_computed\": %llu, \"streamed\": %llu, "
        "\"bytes_h2d\": %llu, \"gb_moved\": %.6f, \"blocked_s\": %.6f, \"device_waits\": %llu, "
        "\"device_stall_s\": %.6f, \"copy_busy_s\": %.6f, "
        "\"link_seconds\": %.6f, \"x_bound\": %.4f, \"accuracy\": %.4f, \"fetch_rate\": %.4f, "
        "\"goodpred\": %.4f, \"decode_vs_reactive\": %.4f, \"ttft_vs_reactive\": %.4f",
        i ? "," : "", r.name.c_str(), evictionName(evictionOf(r)), r.mapped_decode ? "true" : "false",
        (unsigned long long)m.host_read_bytes, r.gen.ttft_seconds, r.gen.prefillTokensPerSecond(),
        r.gen.decodeTokensPerSecond(), (unsigned long long)m.expert_uses, (unsigned long long)m.ready_hits,
        (unsigned long long)m.prefetch_hits, (unsigned long long)m.inflight_hits,
        (unsigned long long)m.misses, (unsigned long long)m.unavailable, (unsigned long long)m.cpu_computed,
        (unsigned long long)m.streamed, (unsigned long long)m.bytes_h2d, m.bytes_h2d / 1e9,
        m.blockedSeconds(), (unsigned long long)m.device_waits, m.device_stall_ns / 1e9, m.copy_busy_ns / 1e9,
        m.link_seconds, ratio(m.linkBusySeconds(), boundSeconds(ctx)), m.accuracy(), m.fetchRate(),
        m.goodPred(), lru ? ratio(r.gen.decodeTokensPerSecond(), lru->gen.decodeTokensPerSecond()) : 0.0,
        lru ? ratio(r.gen.ttft_seconds, lru->gen.ttft_seconds) : 0.0);
    std::printf(", \"sampling\": {\"on_device\": %s, \"logits_bytes_per_decode_token\": %.1f}",
                r.gen.sampled_on_backend ? "true" : "false", logitsBytesPerDecodeToken(r));
    if (ctx.belady && r.policy != OffloadPolicy::kResident)
      std::printf(", \"ready_vs_belady\": %.4f", ratio(m.hitRate(), ctx.belady->hitRate()));
    if (r.policy == OffloadPolicy::kProactive)
      std::printf(
          ", \"switches\": {\"prefetch\": %s, \"chunking\": %s, \"early_preemption\": %s, \"reordering\": "
          "%s, "
          "\"cpu_fallback\": %s, \"prefill_streaming\": %s}",
          s.prefetch ? "true" : "false", s.chunking ? "true" : "false", s.early_preemption ? "true" : "false",
          s.reordering ? "true" : "false", s.cpu_fallback ? "true" : "false",
          s.prefill_streaming ? "true" : "false");
    if (r.prefill_traffic && r.gen.prefill_seconds > 0) {
      // The whole prompt: weights read once per GEMM pass (once per 32 tokens on the
      // tensor cores, per 8 by the matvec), activations once per row block.
      const double read = double(r.prefill_traffic->bytes_read);
      std::printf(
          ", \"matmul_prefill\": {\"tokens\": %d, \"weight_bytes\": %.0f, \"bytes_read\": %.0f, "
          "\"read_vs_weights\": %.4f, \"achieved_gb_s\": %.3f}",
          r.gen.prompt_tokens, double(r.prefill_traffic->weight_bytes), read,
          ratio(read, double(r.prefill_traffic->weight_bytes)), read / r.gen.prefill_seconds / 1e9);
    }
    if (r.decode_traffic && r.gen.decode_steps > 0) {
      // Achieved bandwidth: what the matmuls read per token times tokens per second.
      const double n = r.gen.decode_steps;
      const double read = double(r.decode_traffic->bytes_read) / n;
      std::printf(
          ", \"matmul_per_decode_token\": {\"weight_bytes\": %.0f, \"bytes_read\": %.0f, "
          "\"read_vs_weights\": "
          "%.4f, \"achieved_gb_s\": %.3f}",
          double(r.decode_traffic->weight_bytes) / n, read,
          ratio(read * n, double(r.decode_traffic->weight_bytes)),
          read * r.gen.decodeTokensPerSecond() / 1e9);
    }
    if (r.prefill_work && r.decode_work) {
      std::printf(", \"device_work\": {\"per_prefill_token\": ");
      printWorkPerToken(*r.prefill_work, ctx.prompt_tokens);
      std::printf(", \"per_decode_token\": ");
      printWorkPerToken(*r.decode_work, r.gen.decode_steps);
      std::printf("}");
    }
    std::printf("}");
  }
  std::printf("\n]}\n");
}

}  // namespace moe::cli
