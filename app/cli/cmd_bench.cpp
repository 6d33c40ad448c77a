// bench: one model, one cache budget, every caching policy side by side on the
// same prompt, each against reactive-lru and against the link bound. On the CPU
// backend the link is simulated (bytes / bandwidth; paced by default, so copies
// take that long in wall time and overlap shows); with --backend cuda the cache
// is device memory, copies cross the real link, and the bound uses its measured
// bandwidth.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "app/cli/bench_model.h"
#include "app/cli/bench_report.h"
#include "app/cli/commands.h"
#include "app/cli/model_options.h"
#include "app/cli/offload_options.h"
#include "inference/backend_factory.h"
#include "inference/cuda_library.h"
#include "offload/cpu_expert_cost.h"
#include "offload/history_predictor.h"
#include "offload/host_expert_store.h"
#include "offload/learned_predictor.h"
#include "offload/offload_device.h"
#include "offload/routing/demand_cache.h"
#include "offload/routing/routing_profile.h"
#include "offload/routing/trace_routing.h"
#include "synth/synthetic_model.h"

namespace moe::cli {
namespace {

// How proactive prefetches with the history predictor: on replayed routing (a trace,
// or realistic routing) by default, since the model's own router, which skip-gate
// reads, is overridden there; elsewhere on the `--history` row. The defaults won on
// the held-in traces (docs/offload.md, "Prefetching from routing history").
struct HistoryPrefetch {
  int stride = 1;
  double admission = 4.5;
};

struct BenchSetup {
  Model& model;
  Compute& compute;
  std::shared_ptr<const HostExpertStore> store;
  int slots;
  LinkOptions link;
  CpuExpertCost cpu_cost;
  std::vector<int32_t> prompt;
  GenerationParams gen;  // decode_tokens, greedy unless a sampling option was given
  int decode_tokens;
  bool verbose;
  std::shared_ptr<LearnedPredictor> learned;   // --predictor: the proactive-learned row
  std::shared_ptr<const TraceRouting> replay;  // --routing-trace: each layer's choice from the trace
  HistoryPrefetch history;                     // the history predictor's stride and admission
};

// What the gates of one row asked for, in order: the bound and the simulated caches read it.
struct GateLog {
  std::set<std::pair<int, int>> used;   // every (layer, expert) chosen
  std::vector<ExpertRequest> requests;  // per gate, its distinct experts
};

// Greedy, or with any sampling option (--temp, --top-k, ...) the app's chain with
// those changed: `--temp 0.8` alone is the app's default sampling.
GenerationParams decoding(const Args& args, int n, std::string& name) {
  GenerationParams p;
  p.max_tokens = n;
  p.stop_at_end_token = false;
  const std::set<std::string> options = samplingValueOptions();
  if (std::none_of(options.begin(), options.end(), [&](const std::string& o) { return args.value(o); })) {
    p.sampler.temperature = 0;
    name = "greedy";
    return p;
  }
  p.sampler = samplerParams(args);
  const SamplerParams& sp = p.sampler;
  char text[200];
  std::snprintf(text, sizeof text,
                "sampled: temperature %g, top-k %d, top-p %g, min-p %g, repeat penalty %g over %d, seed %llu",
                double(sp.temperature), sp.top_k, double(sp.top_p), double(sp.min_p),
                double(sp.repeat_penalty), sp.repeat_last_n, (unsigned long long)sp.seed);
  name = sp.temperature <= 0 ? "greedy" : text;
  return p;
}

CudaWorkCounters workBetween(const CudaWorkCounters& a, const CudaWorkCounters& b) {
  return {b.kernel_launches - a.kernel_launches,
          b.host_syncs - a.host_syncs,
          b.bytes_h2d - a.bytes_h2d,
          b.bytes_d2h - a.bytes_d2h,
          b.stream_syncs - a.stream_syncs,
          b.graph_launches - a.graph_launches,
          b.stalling_host_syncs - a.stalling_host_syncs};
}

// One policy, from an empty cache. `gates` (optional) collects what the gates chose.
BenchRow runRow(BenchRow row, const BenchSetup& s, GateLog* gates) {
  OffloadConfig oc;
  oc.policy = row.policy;
  oc.cache_slots = s.slots;
  oc.link = s.link;
  oc.switches = row.switches;
  oc.eviction = row.eviction;
  oc.mapped_decode = row.mapped_decode;
  oc.cpu_cost = s.cpu_cost;
  oc.store = s.store;
  if (s.verbose) oc.on_cpu_decision = printCpuDecision;
  if (row.name.starts_with("proactive-learned")) {
    oc.predictor = s.learned;
    oc.stride = s.learned->distance();
  }
  const bool history = row.name.starts_with("proactive-history") ||
                       (s.replay && row.policy == OffloadPolicy::kProactive && !oc.predictor &&
                        !row.name.starts_with("proactive-skip-gate"));
  if (history) {  // a fresh one: it learns from this row's gates only
    oc.predictor = std::make_shared<HistoryPredictor>(s.model.config().n_layer, s.model.config().n_expert);
    oc.stride = s.history.stride;
    oc.admission = s.history.admission;
  }
  Runtime runtime(s.model, s.compute, oc);
  OffloadEngine& engine = runtime.offload();
  Backend& backend = s.compute.backend();
  const int n_ctx = static_cast<int>(s.prompt.size()) + s.decode_tokens + 1;
  const std::unique_ptr<Transformer> transformer = runtime.makeTransformer(n_ctx);
  Transformer& t = *transformer;
  if (s.replay) t.setRoutingReplay(s.replay);
  if (gates)
    t.setRoutingObserver([&](const RoutingEvent& ev) {
      ExpertRequest r{ev.layer - s.model.config().n_leading_dense, {}};  // the MoE layers counted from 0
      for (int e : ev.experts) {
        gates->used.insert({ev.layer, e});
        if (std::find(r.experts.begin(), r.experts.end(), e) == r.experts.end()) r.experts.push_back(e);
      }
      gates->requests.push_back(std::move(r));
    });
  // The device's work counters (where the runtime counts): at the start, when the
  // first decode step begins, and at the end.
  CudaWorkCounters at_start, at_decode, at_end;
  const bool counted = readCudaWorkCounters(&at_start);
  at_decode = at_start;
  const Backend::MatmulTraffic traffic_at_start = backend.matmulTraffic();
  Backend::MatmulTraffic traffic_at_decode = traffic_at_start;
  t.setBatchObserver([&, prompt_n = int(s.prompt.size()), seen = false](const BatchEvent& ev) mutable {
    if (seen || ev.first_pos < prompt_n) return;
    seen = true;
    traffic_at_decode = backend.matmulTraffic();
    if (counted) readCudaWorkCounters(&at_decode);
  });
  Generator g(s.model, t);
  row.gen = g.generate(s.prompt, s.gen, nullptr);
  row.tokens.assign(g.cachedTokens().begin() + s.prompt.size(), g.cachedTokens().end());
  engine.waitIdle();
  const Backend::MatmulTraffic traffic_at_end = backend.matmulTraffic();
  if (traffic_at_decode.weight_bytes > traffic_at_start.weight_bytes)
    row.prefill_traffic =
        Backend::MatmulTraffic{traffic_at_decode.weight_bytes - traffic_at_start.weight_bytes,
                               traffic_at_decode.bytes_read - traffic_at_start.bytes_read};
  if (traffic_at_end.weight_bytes > traffic_at_decode.weight_bytes)
    row.decode_traffic = Backend::MatmulTraffic{traffic_at_end.weight_bytes - traffic_at_decode.weight_bytes,
                                                traffic_at_end.bytes_read - traffic_at_decode.bytes_read};
  if (counted && readCudaWorkCounters(&at_end)) {
    row.prefill_work = workBetween(at_start, at_decode);
    row.decode_work = workBetween(at_decode, at_end);
  }
  engine.metrics().addGeneration(uint64_t(row.gen.prompt_tokens), row.gen.prefill_seconds,
                                 uint64_t(row.gen.decode_steps), row.gen.decode_seconds);
  row.m = engine.snapshot();
  return row;
}

BenchRow makeRow(const std::string& name, OffloadPolicy p, const ProactiveSwitches& sw = {}) {
  BenchRow r;
  r.name = name;
  r.policy = p;
  r.switches = sw;
  return r;
}

std::vector<BenchRow> withEvictionRules(const std::vector<BenchRow>& rows, const std::string& list);

// The rows to run: --policies (default all), proactive with the command's
// switches, and with --ablate proactive once more per switch, that switch off.
std::vector<BenchRow> plannedRows(const Args& args) {
  std::vector<OffloadPolicy> policies;
  if (auto list = args.value("--policies")) {
    std::stringstream ss(*list);
    std::string name;
    while (std::getline(ss, name, ',')) try {
        policies.push_back(parsePolicy(name));
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
  } else {
    policies = allPolicies();
  }
  const ProactiveSwitches sw = proactiveSwitches(args);
  std::vector<BenchRow> rows;
  for (OffloadPolicy p : policies) rows.push_back(makeRow(policyName(p), p, sw));
  if (args.flag("--ablate")) {
    const std::pair<const char*, bool ProactiveSwitches::*> knobs[] = {
        {"prefetch", &ProactiveSwitches::prefetch},
        {"chunking", &ProactiveSwitches::chunking},
        {"preemption", &ProactiveSwitches::early_preemption},
        {"reordering", &ProactiveSwitches::reordering},
        {"cpu-fallback", &ProactiveSwitches::cpu_fallback},
        {"streaming", &ProactiveSwitches::prefill_streaming}};
    for (const auto& [name, member] : knobs) {
      if (!(sw.*member)) continue;
      ProactiveSwitches off = sw;
      off.*member = false;
      rows.push_back(makeRow(std::string("proactive-no-") + name, OffloadPolicy::kProactive, off));
    }
  }
  if (args.value("--predictor")) rows.push_back(makeRow("proactive-learned", OffloadPolicy::kProactive, sw));
  if (args.flag("--history")) rows.push_back(makeRow("proactive-history", OffloadPolicy::kProactive, sw));
  if (args.flag("--skip-gate")) rows.push_back(makeRow("proactive-skip-gate", OffloadPolicy::kProactive, sw));
  if (rows.empty()) throw UsageError("--policies names no policy");
  if (args.flag("--mapped-decode"))
    for (BenchRow& r : rows) r.mapped_decode = true;
  if (auto list = args.value("--eviction")) return withEvictionRules(rows, *list);
  return rows;
}

// --eviction RULE[,RULE...]: every caching row runs with each rule (instead of its
// policy's own); with more than one, a row's name gets "/rule" (resident caches
// nothing and runs once).
std::vector<BenchRow> withEvictionRules(const std::vector<BenchRow>& rows, const std::string& list) {
  std::vector<Eviction> rules;
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) try {
      rules.push_back(parseEviction(name));
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  if (rules.empty()) throw UsageError("--eviction names no rule");
  std::vector<BenchRow> out;
  for (const BenchRow& r : rows) {
    if (r.policy == OffloadPolicy::kResident) {
      out.push_back(r);
      continue;
    }
    for (Eviction e : rules) {
      BenchRow row = r;
      row.eviction = e;
      if (rules.size() > 1) row.name += std::string("/") + evictionName(e);
      out.push_back(row);
    }
  }
  return out;
}

SessionOptions benchModel(const Args& args) {
  if (auto preset = args.value("--preset")) {
    if (args.flag("--demo") || args.flag("--demo-random") || !args.positionals().empty())
      throw UsageError("--preset and a model (FILE or --demo) are exclusive");
    SessionOptions so;
    so.model_path = ensurePresetModel(*preset, args.valueOr("--quant", "f16"),
                                      args.valueOr("--cache-dir", defaultModelCacheDir()));
    so.threads = args.intOr("--threads", 0);
    so.device = deviceChoice(args);
    return so;
  }
  if (args.value("--quant")) throw UsageError("--quant goes with --preset");
  return sessionOptions(args);
}

}  // namespace

int runBench(const std::vector<std::string>& argv) {
  if (std::find(argv.begin(), argv.end(), "--kernels") != argv.end()) return runBenchKernels(argv);
  if (std::find(argv.begin(), argv.end(), "--sampler") != argv.end()) return runBenchSampler(argv);
  if (std::find(argv.begin(), argv.end(), "--chat-tokens") != argv.end()) return runBenchChatTokens(argv);
  auto vo = modelValueOptions();
  vo.merge(samplingValueOptions());
  vo.insert({"--cache-share", "--cache-mb", "--prompt-tokens", "--decode-tokens", "--link-gbps", "--policies",
             "--preset", "--quant", "--cache-dir", "--predictor", "--prompt", "--cpu-expert-ms",
             "--routing-trace", "--trace-start", "--eviction", "--routing", "--history-stride",
             "--admission"});
  auto flags = modelFlags();
  flags.insert({"--json", "--ablate", "--virtual-link", "--verbose", "--history", "--skip-gate"});
  for (const auto& f : offloadFlags())
    if (f != "--paced") flags.insert(f);
  const Args args(argv, vo, flags);
  const BudgetSetting budget = cacheBudgetOption(args, 0.5);
  const int prompt_tokens = args.intOr("--prompt-tokens", 32);
  const int decode_tokens = args.intOr("--decode-tokens", 32);
  const double link_gbps = args.doubleOr("--link-gbps", 25.0);  // ~ pinned PCIe 4.0 x16 (MODEL-SHAPES.md)
  if (prompt_tokens < 1 || decode_tokens < 1)
    throw UsageError("--prompt-tokens and --decode-tokens must be >= 1");
  if (link_gbps <= 0) throw UsageError("--link-gbps must be > 0");
  std::vector<BenchRow> rows = plannedRows(args);
  SessionOptions so = benchModel(args);

  Compute compute({so.device, so.threads});
  const std::shared_ptr<OffloadDevice> device = compute.offloadDevice();
  Backend& backend = compute.backend();
  Backend& host = compute.hostBackend() ? *compute.hostBackend() : backend;  // where CPU-computed experts run
  auto model = Model::load(openModelFile(so), backend);
  const auto& c = model->config();
  if (device) {
    // resident uploads every expert beside the model's other weights: its row runs only
    // when they fit in the device memory left, with an eighth of it to spare.
    uint64_t used = 0, total = 0;
    const bool fits = backend.deviceMemory(used, total) && used < total &&
                      HostExpertStore::bytesNeeded(*model) <= (total - used) / 8 * 7;
    std::erase_if(rows, [fits](const BenchRow& r) {
      const bool skip = r.policy == OffloadPolicy::kResident && !fits;
      if (skip)
        std::fprintf(stderr, "bench: %s skipped: its experts do not fit in the device memory left\n",
                     r.name.c_str());
      return skip;
    });
    if (rows.empty()) throw UsageError("no policy left to bench on the cuda backend");
  }
  const int slots = cacheSlotsFor(budget, *model, OffloadPolicy::kProactive);
  const int total = OffloadEngine::routedExperts(*model);
  auto store = std::make_shared<const HostExpertStore>(*model, device ? device->hostAllocator() : nullptr);
  // --cpu-expert-ms A,B: the CPU cost of one expert for 1 and 8 tokens, fixed instead of
  // measured, so the CPU rule's decisions repeat from run to run.
  CpuExpertCost cost;
  if (auto fixed = args.value("--cpu-expert-ms")) {
    if (std::sscanf(fixed->c_str(), "%lf,%lf", &cost.seconds_1, &cost.seconds_8) != 2 ||
        !(cost.seconds_1 > 0) || cost.seconds_8 < cost.seconds_1)
      throw UsageError("--cpu-expert-ms takes two times in ms, 1 and 8 tokens (e.g. 0.7,2.4)");
    cost.seconds_1 /= 1e3;
    cost.seconds_8 /= 1e3;
  } else {
    cost = measureCpuExpertCost(host, *store);
  }
  std::vector<int32_t> prompt;
  if (auto text =
          args.value("--prompt")) {  // real text routes like real use; the default is a fixed id pattern
    const auto& tok = model->tokenizer();
    prompt = tok.encode(*text, tok.addBosDefault(), false);
    if (prompt.empty()) throw UsageError("--prompt encodes to no tokens");
  } else {
    for (int i = 0; i < prompt_tokens; ++i) prompt.push_back((7 + 31 * i + i * i) % c.n_vocab);
  }
  LinkOptions link{device ? 0.0 : link_gbps * 1e9, !device && !args.flag("--virtual-link")};
  std::shared_ptr<LearnedPredictor> learned;
  if (auto file = args.value("--predictor"))  // throws when it was trained for another model's shape
    learned = std::make_shared<LearnedPredictor>(PredictorSet::load(*file), c.n_embd, c.n_expert);
  std::shared_ptr<const TraceRouting> replay;
  if (auto trace = args.value("--routing-trace")) {
    const int start = args.intOr("--trace-start", 0);
    if (start < 0) throw UsageError("--trace-start must be >= 0");
    replay = std::make_shared<const TraceRouting>(loadRoutingTrace(*trace), c, start);
    const int needed = int(prompt.size()) + decode_tokens;
    std::fprintf(stderr, "bench: routing replayed from %s (%d tokens of %d sequences, from token %d)%s\n",
                 trace->c_str(), replay->trace().tokens(), replay->trace().sequences(), start,
                 needed > replay->trace().tokens() ? "; the run is longer: the trace repeats" : "");
  } else if (args.value("--trace-start")) {
    throw UsageError("--trace-start goes with --routing-trace");
  }
  std::string routing_name = replay ? "trace " + *args.value("--routing-trace") : "the model's router";
  if (auto r = args.value("--routing")) {
    if (*r != synth::kRealisticRouting) throw UsageError("--routing: the one value is 'realistic'");
    if (replay) throw UsageError("--routing realistic and --routing-trace are exclusive");
    replay = realisticRouting(c);
    routing_name = "realistic (" + replay->trace().source + ")";
  } else if (!replay && model->file().getString(synth::kRoutingKey)) {
    routing_name =
        "realistic, as the file asks (synthetic routing following " + shippedRoutingProfile().source + ")";
  }
  HistoryPrefetch history;
  history.stride = args.intOr("--history-stride", history.stride);
  history.admission = args.doubleOr("--admission", history.admission);
  if (history.stride < 1 || history.admission < 0)
    throw UsageError("--history-stride must be >= 1 and --admission >= 0");
  std::string decoding_name;
  const GenerationParams gen = decoding(args, decode_tokens, decoding_name);
  const BenchSetup setup{*model,  compute, store,  slots,         link,
                         cost,    prompt,  gen,    decode_tokens, args.flag("--verbose"),
                         learned, replay,  history};
  const double link_bps = device ? device->linkBytesPerSecond() : link.bytes_per_second;

  std::fprintf(stderr, "bench: %s, %d of %d experts cached (%.0f%%), prompt %d + decode %d tokens, %s\n",
               c.model_name.c_str(), slots, total, 100.0 * slots / total, int(prompt.size()), decode_tokens,
               decoding_name.c_str());
  if (device)
    std::fprintf(stderr, "bench: compute %s; link: measured pinned host->device %.1f GB/s\n",
                 backend.name().c_str(), link_bps / 1e9);
  else
    std::fprintf(stderr, "bench: compute CPU backend; link: simulated %.1f GB/s%s\n", link_gbps,
                 link.paced ? " (paced)" : " (virtual clock)");
  if (model->isSynthetic()) std::fprintf(stderr, "%s\n", kDemoNotice);

  // The experts the gates chose (every row generates the same tokens) are collected on
  // a row whose routing the host sees anyway: observing resident's would bring its
  // routing back to the host and its decode step off the device. With resident rows
  // only, they are collected in the warm-up, whose figures are dropped.
  GateLog gates;
  const auto observed = std::find_if(rows.begin(), rows.end(),
                                     [](const BenchRow& r) { return r.policy != OffloadPolicy::kResident; });
  // Warm-up (page cache, allocators, first kernel launches).
  runRow(device ? rows.front() : makeRow("resident", OffloadPolicy::kResident), setup,
         observed == rows.end() ? &gates : nullptr);
  for (auto& r : rows) {
    std::fprintf(stderr, "bench: running %s\n", r.name.c_str());
    r = runRow(r, setup, observed != rows.end() && &r == &*observed ? &gates : nullptr);
  }
  for (const auto& r : rows) {
    if (r.tokens == rows.front().tokens) continue;
    // On a GPU, experts computed on the CPU round differently from the GPU's kernels,
    // so a near tie in the logits may pick another token; any other difference is a bug.
    const bool cpu_rounding = device && (r.m.cpu_computed > 0 || rows.front().m.cpu_computed > 0);
    if (!cpu_rounding)
      throw std::runtime_error("policy " + r.name + " generated different tokens than " + rows.front().name +
                               ": a caching bug");
    size_t at = 0;
    while (at < r.tokens.size() && at < rows.front().tokens.size() && r.tokens[at] == rows.front().tokens[at])
      ++at;
    std::fprintf(stderr,
                 "bench: %s diverges from %s at decode token %zu (CPU-computed experts round differently "
                 "from the GPU's)\n",
                 r.name.c_str(), rows.front().name.c_str(), at);
  }

  BenchContext ctx;
  ctx.model_name = c.model_name;
  ctx.cache_slots = slots;
  ctx.total_experts = total;
  ctx.prompt_tokens = int(prompt.size());
  ctx.decode_tokens = decode_tokens;
  ctx.threads = so.threads;
  ctx.compute = backend.name();
  ctx.link = device ? "measured" : "simulated";
  ctx.link_bytes_per_second = link_bps;
  ctx.paced = link.paced;
  ctx.bound_bytes = uint64_t(gates.used.size()) * store->expertBytes();
  ctx.expert_bytes = store->expertBytes();
  ctx.routing = routing_name;
  if (!gates.requests.empty()) {
    ctx.belady = simulateBelady(gates.requests, c.n_expert, slots);
    ctx.lru_per_layer =
        simulateLru(gates.requests, c.n_layer - c.n_leading_dense, c.n_expert, slots, LruScope::kPerLayer);
  }
  ctx.cpu_expert_ms = cost.seconds_1 * 1e3;
  ctx.predictor = replay ? "history" : "skip-gate";
  ctx.decoding = decoding_name;
  if (device) ctx.timings_meaningful = cudaLibrary()->timings_meaningful;
  if (args.flag("--json"))
    printBenchJson(rows, ctx);
  else
    printBenchTable(rows, ctx);
  return 0;
}

}  // namespace moe::cli
