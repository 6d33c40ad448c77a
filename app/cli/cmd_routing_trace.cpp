// routing-trace: convert recorded routing (offload/routing/routing_trace.h) into
// the compact file moechat ships and replays, and describe a trace: how sticky
// its routing is and what demand caches of a few sizes hit on it, beside the
// same caches on uniform routing of the same shape.
#include <algorithm>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "offload/history_predictor.h"
#include "offload/routing/demand_cache.h"
#include "offload/routing/prefetch_sim.h"
#include "offload/routing/routing_profile.h"
#include "offload/routing/routing_trace.h"

namespace moe::cli {
namespace {

int convert(const std::vector<std::string>& argv) {
  const Args args(argv, {"--output", "--experts", "--max-tokens", "--max-sequences", "--source"}, {},
                  {{"-o", "--output"}});
  const auto out = args.value("--output");
  if (!out || args.positionals().empty())
    throw UsageError(
        "routing-trace convert IN... -o OUT [--experts N] [--max-tokens N] [--max-sequences N] [--source "
        "TEXT]");
  const int max_tokens = args.intOr("--max-tokens", 0), max_sequences = args.intOr("--max-sequences", 0);
  RoutingTrace all;
  for (const auto& in : args.positionals()) {
    RoutingTrace one = loadRoutingTrace(in);
    if (all.sequences() == 0) {
      all.n_layer = one.n_layer, all.k = one.k, all.n_expert_exact = one.n_expert_exact;
      all.source = one.source;
    } else {
      if (one.n_layer != all.n_layer || one.k != all.k)
        throw RoutingTraceError(in + ": " + one.shape() + ", unlike " + all.shape());
      all.source += ", " + one.source;
      all.n_expert_exact = all.n_expert_exact && one.n_expert_exact;
    }
    all.n_expert = std::max(all.n_expert, one.n_expert);
    for (int s = 0; s < one.sequences(); ++s) {
      if (max_sequences > 0 && all.sequences() >= max_sequences) break;
      const size_t per = size_t(one.n_layer) * size_t(one.k);
      const size_t a = one.sequence_start[size_t(s)] * per, b = one.sequence_start[size_t(s) + 1] * per;
      all.addSequence(std::span(one.ids).subspan(a, b - a), std::span(one.weights).subspan(a, b - a));
    }
  }
  if (auto experts = args.value("--experts")) {
    const int n = args.intOr("--experts", 0);
    if (n < all.n_expert)
      throw UsageError("--experts " + *experts + ": the trace names expert " +
                       std::to_string(all.n_expert - 1));
    all.n_expert = n;
    all.n_expert_exact = true;
  }
  if (max_tokens > 0) all.truncate(max_tokens);
  if (auto source = args.value("--source")) all.source = *source;  // where it came from, said for its readers
  saveRoutingTrace(all, *out);
  std::fprintf(stderr, "wrote %s: %d sequences, %d tokens, %s\n", out->c_str(), all.sequences(), all.tokens(),
               all.shape().c_str());
  return 0;
}

// Uniform routing of the trace's shape and length: k distinct experts per token and layer.
RoutingTrace uniformLike(const RoutingTrace& t, uint32_t seed) {
  RoutingTrace u;
  u.n_layer = t.n_layer, u.n_expert = t.n_expert, u.k = t.k;
  std::mt19937 rng(seed);
  std::vector<uint16_t> ids;
  std::vector<float> w;
  std::vector<uint16_t> all(size_t(t.n_expert));
  for (size_t e = 0; e < all.size(); ++e) all[e] = uint16_t(e);
  for (int i = 0; i < t.tokens() * t.n_layer; ++i) {
    for (int j = 0; j < t.k; ++j)
      std::swap(all[size_t(j)], all[size_t(j) + rng() % (all.size() - size_t(j))]);
    ids.insert(ids.end(), all.begin(), all.begin() + t.k);
    w.insert(w.end(), size_t(t.k), 1.0f / float(t.k));
  }
  u.addSequence(ids, w);
  return u;
}

// Of each token's experts (per layer), the share the previous token of its sequence also chose.
double adjacentOverlap(const RoutingTrace& t) {
  uint64_t shared = 0, total = 0;
  for (int s = 0; s < t.sequences(); ++s)
    for (int tok = int(t.sequence_start[size_t(s)]) + 1; tok < int(t.sequence_start[size_t(s) + 1]); ++tok)
      for (int l = 0; l < t.n_layer; ++l) {
        const auto now = t.idsAt(tok, l), before = t.idsAt(tok - 1, l);
        for (uint16_t e : now) shared += std::count(before.begin(), before.end(), e) ? 1 : 0;
        total += now.size();
      }
  return total ? double(shared) / double(total) : 0.0;
}

// Per layer, the share of its selections its 8 most used experts take; the mean over layers.
double topEightShare(const RoutingTrace& t) {
  double sum = 0;
  for (int l = 0; l < t.n_layer; ++l) {
    std::vector<uint64_t> count(size_t(t.n_expert));
    for (int tok = 0; tok < t.tokens(); ++tok)
      for (uint16_t e : t.idsAt(tok, l)) ++count[e];
    std::sort(count.rbegin(), count.rend());
    uint64_t top = 0, all = 0;
    for (size_t i = 0; i < count.size(); ++i) (i < 8 ? top : all) += count[i];
    all += top;
    sum += all ? double(top) / double(all) : 0.0;
  }
  return t.n_layer ? sum / t.n_layer : 0.0;
}

std::vector<double> parseShares(const std::string& list) {
  std::vector<double> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (end == item.c_str() || *end || !(v > 0 && v <= 1)) throw UsageError("--budgets: shares in (0, 1]");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError("--budgets names no share");
  return out;
}

int stats(const std::vector<std::string>& argv) {
  const Args args(argv, {"--budgets", "--max-tokens"}, {"--json"});
  if (args.positionals().size() != 1)
    throw UsageError("routing-trace stats TRACE [--budgets 0.25,0.5,0.75] [--max-tokens N] [--json]");
  RoutingTrace t = loadRoutingTrace(args.positionals()[0]);
  if (int n = args.intOr("--max-tokens", 0); n > 0) t.truncate(n);
  const std::vector<double> shares = parseShares(args.valueOr("--budgets", "0.25,0.5,0.75"));
  const RoutingTrace u = uniformLike(t, 1);
  const auto real = decodeRequests(t), uniform = decodeRequests(u);
  const int total = t.n_layer * t.n_expert;
  const bool json = args.flag("--json");
  const double overlap = adjacentOverlap(t), top8 = topEightShare(t);
  if (json)
    std::printf(
        "{\"trace\": \"%s\", \"sequences\": %d, \"tokens\": %d, \"layers\": %d, \"experts\": %d, \"top_k\": "
        "%d, "
        "\"adjacent_overlap\": %.4f, \"uniform_adjacent_overlap\": %.4f, \"top8_share\": %.4f, \"budgets\": "
        "[",
        args.positionals()[0].c_str(), t.sequences(), t.tokens(), t.n_layer, t.n_expert, t.k, overlap,
        adjacentOverlap(u), top8);
  else
    std::printf(
        "%s: %d sequences, %d tokens, %s\nadjacent tokens share %.1f%% of their experts per layer (uniform "
        "%.1f%%); a layer's 8 most used experts take %.1f%% of its selections\n"
        "%-8s %6s  %10s %10s %10s %10s  %10s %10s %10s\n",
        args.positionals()[0].c_str(), t.sequences(), t.tokens(), t.shape().c_str(), 100 * overlap,
        100 * adjacentOverlap(u), 100 * top8, "budget", "slots", "LRU/layer", "LRU", "frequency", "Belady",
        "uni LRU/l", "uni LRU", "uni Belady");
  for (size_t i = 0; i < shares.size(); ++i) {
    const int slots = std::max(t.k, int(shares[i] * total + 0.5));
    const double r[7] = {simulateLru(real, t.n_layer, t.n_expert, slots, LruScope::kPerLayer).hitRate(),
                         simulateLru(real, t.n_layer, t.n_expert, slots, LruScope::kShared).hitRate(),
                         simulateBelady(real, t.n_expert, slots).hitRate(),
                         simulateLru(uniform, u.n_layer, u.n_expert, slots, LruScope::kPerLayer).hitRate(),
                         simulateLru(uniform, u.n_layer, u.n_expert, slots, LruScope::kShared).hitRate(),
                         simulateBelady(uniform, u.n_expert, slots).hitRate(),
                         simulateSlotTable(real, t.n_layer, slots, Eviction::kSharedFrequency).hitRate()};
    if (json)
      std::printf(
          "%s\n  {\"share\": %.4f, \"slots\": %d, \"lru_per_layer\": %.4f, \"lru_shared\": %.4f, "
          "\"shared_frequency\": %.4f, \"belady\": %.4f, "
          "\"uniform_lru_per_layer\": %.4f, \"uniform_lru_shared\": %.4f, \"uniform_belady\": %.4f}",
          i ? "," : "", shares[i], slots, r[0], r[1], r[6], r[2], r[3], r[4], r[5]);
    else
      std::printf("%7.0f%% %6d  %9.1f%% %9.1f%% %9.1f%% %9.1f%%  %9.1f%% %9.1f%% %9.1f%%\n", 100 * shares[i],
                  slots, 100 * r[0], 100 * r[1], 100 * r[6], 100 * r[2], 100 * r[3], 100 * r[4], 100 * r[5]);
  }
  if (json)
    std::printf("\n]}\n");
  else
    std::printf(
        "hit rates of demand caches over the decode tokens in order (frequency: the offload path's slot "
        "table "
        "with shared-frequency eviction; Belady: the clairvoyant optimum); uni: "
        "uniform routing of the same shape and length\n");
  return 0;
}

std::vector<double> parseList(const std::string& list, const char* flag) {
  std::vector<double> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (end == item.c_str() || *end || !(v >= 0)) throw UsageError(std::string(flag) + ": numbers >= 0");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError(std::string(flag) + " names nothing");
  return out;
}

// Proactive policies on a trace without the engine (prefetch_sim.h): per budget,
// the experts ready at the gate and the experts moved (misses + prefetches, in
// experts per use) of the history predictor with each admission ratio, beside
// per-layer LRU, the slot table's demand cache and Belady.
int simulate(const std::vector<std::string>& argv) {
  const Args args(argv,
                  {"--budgets", "--max-tokens", "--admission", "--stride", "--guesses", "--eviction",
                   "--horizon", "--sources"},
                  {"--json", "--hints", "--bypass", "--popularity"});
  if (args.positionals().size() != 1)
    throw UsageError(
        "routing-trace simulate TRACE [--budgets 0.25,0.5,0.75] [--admission 0,1] [--stride 2] [--guesses 8] "
        "[--eviction shared-frequency] [--horizon 1] [--hints] [--bypass] [--sources 0] [--popularity] "
        "[--max-tokens N] [--json]");
  RoutingTrace t = loadRoutingTrace(args.positionals()[0]);
  if (int n = args.intOr("--max-tokens", 0); n > 0) t.truncate(n);
  const std::vector<double> shares = parseShares(args.valueOr("--budgets", "0.25,0.5,0.75"));
  const std::vector<double> admissions = parseList(args.valueOr("--admission", "0,1"), "--admission");
  ProactiveSimOptions o;
  o.stride = args.intOr("--stride", 2);
  o.budget = args.intOr("--guesses", 2 * t.k);
  try {
    o.eviction = parseEviction(args.valueOr("--eviction", "shared-frequency"));
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  o.reuse_horizon = args.intOr("--horizon", o.reuse_horizon);
  o.hints = args.flag("--hints");
  o.bypass = args.flag("--bypass");
  const bool popularity = args.flag("--popularity");
  if (o.stride < 1 || o.budget < 1 || o.reuse_horizon < 1)
    throw UsageError("--stride, --guesses and --horizon must be >= 1");
  const auto requests = decodeRequests(t);
  const int total = t.n_layer * t.n_expert;
  const bool json = args.flag("--json");
  auto row = [&](double share, const char* name, double admission, double ready, double moved, double belady,
                 double lru_moved, bool first) {
    if (json)
      std::printf(
          "%s\n  {\"share\": %.4f, \"policy\": \"%s\", \"admission\": %.3f, \"ready\": %.4f, "
          "\"moved_per_use\": %.4f, \"x_belady\": %.4f, \"moved_x_lru\": %.4f}",
          first ? "" : ",", share, name, admission, ready, moved, ready / belady, moved / lru_moved);
    else
      std::printf("%7.0f%%  %-26s %8.3f %8.1f%% %8.3f %8.3f %8.3f\n", 100 * share, name, admission,
                  100 * ready, ready / belady, moved, moved / lru_moved);
  };
  if (json)
    std::printf(
        "{\"trace\": \"%s\", \"tokens\": %d, \"stride\": %d, \"guesses\": %d, \"eviction\": \"%s\", "
        "\"rows\": [",
        args.positionals()[0].c_str(), t.tokens(), o.stride, o.budget, evictionName(o.eviction));
  else
    std::printf("%s: %d tokens, %s; stride %d, %d guesses, %s eviction\n%-8s  %-26s %8s %9s %8s %8s %8s\n",
                args.positionals()[0].c_str(), t.tokens(), t.shape().c_str(), o.stride, o.budget,
                evictionName(o.eviction), "budget", "policy", "admit", "ready", "xBelady", "moved", "xLRU");
  bool first = true;
  for (double share : shares) {
    const int slots = std::max(t.k, int(share * total + 0.5));
    const DemandResult belady = simulateBelady(requests, t.n_expert, slots);
    const DemandResult lru = simulateLru(requests, t.n_layer, t.n_expert, slots, LruScope::kPerLayer);
    const double uses = double(lru.uses), lru_moved = double(lru.misses()) / uses;
    row(share, "belady", 0, belady.hitRate(), double(belady.misses()) / uses, belady.hitRate(), lru_moved,
        first);
    first = false;
    row(share, "lru-per-layer", 0, lru.hitRate(), lru_moved, belady.hitRate(), lru_moved, false);
    const ProactiveSimResult demand = simulateProactive(requests, t.n_layer, slots, nullptr, o);
    row(share, "demand", 0, demand.readyRate(), double(demand.uses - demand.ready) / uses, belady.hitRate(),
        lru_moved, false);
    for (double a : admissions) {
      ProactiveSimOptions oa = o;
      oa.admission = a;
      HistoryPredictor history(t.n_layer, t.n_expert, popularity, args.intOr("--sources", 0));
      const ProactiveSimResult r = simulateProactive(requests, t.n_layer, slots, &history, oa);
      row(share, "history", a, r.readyRate(), double(r.uses - r.ready + r.prefetch_copies) / uses,
          belady.hitRate(), lru_moved, false);
      if (!json)
        std::printf(
            "          accuracy %.1f%%, prefetch hits %.1f%% of uses, prefetched %.3f per use, skipped "
            "%.3f\n",
            100 * r.accuracy(), 100.0 * double(r.prefetch_ready) / uses, double(r.prefetch_copies) / uses,
            double(r.prefetch_skipped) / uses);
    }
  }
  if (json)
    std::printf("\n]}\n");
  else
    std::printf(
        "ready: share of the gates' experts cached at their gate; moved: experts copied or streamed per use "
        "(misses + prefetches); xLRU: moved over per-layer LRU's; demand: the slot table alone\n");
  return 0;
}

// The profile of a trace (routing_profile.h), as the text the project ships.
int profile(const std::vector<std::string>& argv) {
  const Args args(argv, {"--output", "--max-tokens", "--source"}, {}, {{"-o", "--output"}});
  if (args.positionals().size() != 1)
    throw UsageError("routing-trace profile TRACE [-o FILE] [--max-tokens N] [--source TEXT]");
  RoutingTrace t = loadRoutingTrace(args.positionals()[0]);
  if (int n = args.intOr("--max-tokens", 0); n > 0) t.truncate(n);
  RoutingProfile p = measureRoutingProfile(t);
  if (auto source = args.value("--source")) p.source = *source;
  const std::string text = formatRoutingProfile(p);
  if (auto out = args.value("--output")) {
    std::FILE* f = std::fopen(out->c_str(), "wb");
    if (!f || std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fclose(f) != 0)
      throw std::runtime_error("cannot write " + *out);
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
  return 0;
}

// A trace drawn to follow a profile (the shipped one by default), for any shape.
int synthesize(const std::vector<std::string>& argv) {
  const Args args(argv, {"--output", "--profile", "--layers", "--experts", "--top-k", "--tokens", "--seed"},
                  {}, {{"-o", "--output"}});
  const auto out = args.value("--output");
  if (!out || !args.positionals().empty())
    throw UsageError(
        "routing-trace synthesize -o OUT --layers N --experts N --top-k K [--tokens N] [--seed S] [--profile "
        "FILE]");
  RoutingProfile p = shippedRoutingProfile();
  if (auto file = args.value("--profile")) {
    std::FILE* f = std::fopen(file->c_str(), "rb");
    if (!f) throw std::runtime_error("cannot open " + *file);
    std::string text;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    std::fclose(f);
    p = parseRoutingProfile(text);
  }
  const int layers = args.intOr("--layers", 0), experts = args.intOr("--experts", 0),
            k = args.intOr("--top-k", 0);
  const int tokens = args.intOr("--tokens", 4096);
  if (layers < 1 || experts < 1 || k < 1 || k > experts || experts > 65535 || tokens < 2)
    throw UsageError(
        "--layers, --experts and --top-k are required: 1 <= top-k <= experts <= 65535; --tokens >= 2");
  const RoutingTrace t = synthesizeRouting(p, layers, experts, k, tokens, args.uint64Or("--seed", 1));
  saveRoutingTrace(t, *out);
  std::fprintf(stderr, "wrote %s: %d tokens, %s, %s\n", out->c_str(), t.tokens(), t.shape().c_str(),
               t.source.c_str());
  return 0;
}

}  // namespace

int runRoutingTrace(const std::vector<std::string>& argv) {
  if (argv.empty()) throw UsageError("routing-trace convert|stats|simulate|profile|synthesize ...");
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (argv[0] == "convert") return convert(rest);
  if (argv[0] == "stats") return stats(rest);
  if (argv[0] == "simulate") return simulate(rest);
  if (argv[0] == "profile") return profile(rest);
  if (argv[0] == "synthesize") return synthesize(rest);
  throw UsageError("routing-trace: unknown action '" + argv[0] +
                   "' (convert, stats, simulate, profile, synthesize)");
}

}  // namespace moe::cli
