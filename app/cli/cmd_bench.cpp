// bench: one model, one cache budget, the caching policies side by side, each
// against the same baseline and against the link bound. On this milestone the
// compute is the CPU backend and the link is simulated (a virtual clock of bytes
// / bandwidth); the CUDA backend will put real copies and kernels behind the same
// table.
#include <cstdio>
#include <set>
#include <string>

#include "app/cli/commands.h"
#include "app/cli/model_options.h"
#include "offload/cached_expert_source.h"
#include "offload/copy_engine.h"
#include "offload/host_expert_store.h"
#include "offload/resident_expert_source.h"
#include "offload/skip_gate_predictor.h"

namespace moe::cli {
namespace {

struct BenchResult {
  std::string policy;
  GenerationStats gen;
  OffloadSnapshot m;
  double link_seconds = 0;  // simulated: bytes moved / link bandwidth
  uint64_t host_computed = 0;
  std::vector<int32_t> tokens;  // what it generated (must match across policies)
};

struct BenchSetup {
  Model& model;
  Backend& backend;
  const HostExpertStore& store;
  int slots;
  double link_bytes_per_second;
  int stride;
  std::vector<int32_t> prompt;
  int decode_tokens;
};

GenerationParams greedy(int n) {
  GenerationParams p;
  p.max_tokens = n;
  p.sampler.temperature = 0;
  p.stop_at_end_token = false;
  return p;
}

BenchResult runPolicy(const std::string& policy, const BenchSetup& s, std::set<std::pair<int, int>>* used) {
  BenchResult r;
  r.policy = policy;
  const auto& c = s.model.config();
  const int n_ctx = static_cast<int>(s.prompt.size()) + s.decode_tokens + 1;
  auto generate = [&](ExpertSource& source) {
    Transformer t(s.model, s.backend, source, n_ctx);
    if (used)
      t.setRoutingObserver([&](const RoutingEvent& ev) {
        for (int e : ev.experts) used->insert({ev.layer, e});
      });
    Generator g(s.model, t);
    r.gen = g.generate(s.prompt, greedy(s.decode_tokens), nullptr);
    r.tokens.assign(g.cachedTokens().begin() + s.prompt.size(), g.cachedTokens().end());
  };
  if (policy == "resident") {
    ResidentExpertSource source(s.model.hostExperts());
    generate(source);
    return r;
  }
  ExpertCache cache(s.slots, s.store.expertBytes(), c.n_layer);
  HostCopyEngine link(s.link_bytes_per_second);
  OffloadMetrics metrics;
  TransferWorker worker(cache, s.store, link, metrics, TransferMode::kThreaded);
  SkipGatePredictor skip_gate(s.model);
  PrefetchOptions prefetch;
  prefetch.stride = s.stride;
  if (policy == "proactive") prefetch.predictor = &skip_gate;
  CachedExpertSource source(s.store, cache, worker, c.n_expert_used, prefetch);
  generate(source);
  worker.waitIdle();
  r.m = metrics.snapshot();
  r.link_seconds = link.simulatedSeconds();
  r.host_computed = source.hostComputed();
  return r;
}

double share(uint64_t part, uint64_t whole) { return whole ? 100.0 * part / whole : 0.0; }

void printTable(const std::vector<BenchResult>& rows, double bound_seconds, const BenchResult& reactive) {
  std::printf("%-12s %10s %10s %7s %7s %7s %7s %6s %9s %10s %8s %9s\n", "policy", "prefill/s", "decode/s",
              "ready%", "prefet%", "flight%", "miss%", "host", "MB moved", "link s", "x bound", "vs react");
  for (const auto& r : rows) {
    const auto& m = r.m;
    const double vs = reactive.gen.decodeTokensPerSecond() > 0
                          ? r.gen.decodeTokensPerSecond() / reactive.gen.decodeTokensPerSecond()
                          : 0;
    std::printf("%-12s %10.1f %10.1f %7.1f %7.1f %7.1f %7.1f %6llu %9.2f %10.5f %8.2f %8.2fx\n",
                r.policy.c_str(), r.gen.prefillTokensPerSecond(), r.gen.decodeTokensPerSecond(),
                share(m.ready_hits, m.expert_uses), share(m.prefetch_hits, m.expert_uses),
                share(m.inflight_hits, m.expert_uses), share(m.misses, m.expert_uses),
                (unsigned long long)r.host_computed, m.bytes_h2d / 1e6, r.link_seconds,
                bound_seconds > 0 ? r.link_seconds / bound_seconds : 0.0, vs);
  }
}

void printJson(const std::vector<BenchResult>& rows, double bound_seconds, uint64_t bound_bytes, int slots,
               int total, double link, const std::string& model_name) {
  std::printf(
      "{\"model\": \"%s\", \"cache_slots\": %d, \"total_experts\": %d, \"link_bytes_per_second\": %.0f, "
      "\"link\": \"simulated\", \"compute\": \"cpu\", \"bound_bytes\": %llu, \"bound_seconds\": %.6f, "
      "\"policies\": [",
      model_name.c_str(), slots, total, link, (unsigned long long)bound_bytes, bound_seconds);
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const auto& m = r.m;
    std::printf(
        "%s\n  {\"policy\": \"%s\", \"ttft_s\": %.6f, \"prefill_tok_s\": %.3f, \"decode_tok_s\": %.3f, "
        "\"expert_uses\": %llu, \"ready_hits\": %llu, \"prefetch_hits\": %llu, \"inflight_hits\": %llu, "
        "\"misses\": %llu, \"host_computed\": %llu, \"bytes_h2d\": %llu, \"link_seconds\": %.6f}",
        i ? "," : "", r.policy.c_str(), r.gen.ttft_seconds, r.gen.prefillTokensPerSecond(),
        r.gen.decodeTokensPerSecond(), (unsigned long long)m.expert_uses, (unsigned long long)m.ready_hits,
        (unsigned long long)m.prefetch_hits, (unsigned long long)m.inflight_hits,
        (unsigned long long)m.misses, (unsigned long long)r.host_computed, (unsigned long long)m.bytes_h2d,
        r.link_seconds);
  }
  std::printf("\n]}\n");
}

}  // namespace

int runBench(const std::vector<std::string>& argv) {
  auto vo = modelValueOptions();
  vo.insert({"--cache-share", "--prompt-tokens", "--decode-tokens", "--link-gbps"});
  auto flags = modelFlags();
  flags.insert("--json");
  const Args args(argv, vo, flags);
  SessionOptions so = sessionOptions(args);
  const double cache_share = args.doubleOr("--cache-share", 0.5);
  const int prompt_tokens = args.intOr("--prompt-tokens", 32);
  const int decode_tokens = args.intOr("--decode-tokens", 32);
  const double link_gbps = args.doubleOr("--link-gbps", 25.0);  // ~ pinned PCIe 4.0 x16 (MODEL-SHAPES.md)
  if (cache_share <= 0 || cache_share > 1) throw UsageError("--cache-share must be in (0, 1]");
  if (prompt_tokens < 1 || decode_tokens < 1)
    throw UsageError("--prompt-tokens and --decode-tokens must be >= 1");
  if (link_gbps <= 0) throw UsageError("--link-gbps must be > 0");

  auto backend = makeCpuBackend(so.threads);
  auto model = Model::load(openModelFile(so), *backend);
  const auto& c = model->config();
  HostExpertStore store(*model);
  int moe_layers = 0;
  for (int il = 0; il < c.n_layer; ++il) moe_layers += store.hasLayer(il);
  const int total = moe_layers * c.n_expert;
  const int slots = std::max(2, static_cast<int>(cache_share * total));
  // ProMoE's stride is 2; a model of fewer MoE layers can only look one ahead.
  const int stride = moe_layers >= 3 ? 2 : 1;
  std::vector<int32_t> prompt;
  for (int i = 0; i < prompt_tokens; ++i) prompt.push_back((7 + 31 * i + i * i) % c.n_vocab);
  const BenchSetup setup{*model, *backend, store, slots, link_gbps * 1e9, stride, prompt, decode_tokens};

  std::fprintf(
      stderr,
      "bench: %s, %d of %d experts cached (%.0f%%), prompt %d + decode %d tokens, greedy; compute: CPU "
      "backend; link: simulated %.1f GB/s; proactive = skip-gate at stride %d\n",
      c.model_name.c_str(), slots, total, 100.0 * slots / total, prompt_tokens, decode_tokens, link_gbps,
      stride);
  if (so.demo || model->isSynthetic()) std::fprintf(stderr, "%s\n", kDemoNotice);

  runPolicy("resident", setup, nullptr);  // warm-up (page cache, allocator), not reported
  std::set<std::pair<int, int>> used;
  std::vector<BenchResult> rows;
  rows.push_back(runPolicy("resident", setup, &used));
  rows.push_back(runPolicy("reactive-lru", setup, nullptr));
  rows.push_back(runPolicy("proactive", setup, nullptr));
  for (const auto& r : rows)
    if (r.tokens != rows.front().tokens)
      throw std::runtime_error("policy " + r.policy + " generated different tokens: a caching bug");

  // Any policy starting from an empty cache must copy each distinct expert the run uses once.
  const uint64_t bound_bytes = uint64_t(used.size()) * store.expertBytes();
  const double bound_seconds = bound_bytes / (link_gbps * 1e9);
  if (args.flag("--json")) {
    printJson(rows, bound_seconds, bound_bytes, slots, total, link_gbps * 1e9, c.model_name);
  } else {
    printTable(rows, bound_seconds, rows[1]);
    std::printf(
        "bound: %zu distinct experts used = %.2f MB, %.5f s over the simulated link; "
        "all policies generated identical tokens\n",
        used.size(), bound_bytes / 1e6, bound_seconds);
    std::printf("resident = experts in place (no cache, no copies): the compute-only baseline\n");
  }
  return 0;
}

}  // namespace moe::cli
