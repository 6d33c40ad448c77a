#include "offload/routing/routing_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace moe {
namespace {

constexpr int kMaxProfiledExperts = 4096;  // the partner table is n_expert^2 counts

// Per token, whether it continues the token before it (same sequence).
std::vector<bool> continuesPrevious(const RoutingTrace& trace) {
  std::vector<bool> cont(size_t(trace.tokens()), true);
  for (size_t s = 0; s + 1 < trace.sequence_start.size(); ++s) cont[trace.sequence_start[s]] = false;
  return cont;
}

// Of the layer's token choices that have `window` tokens of their sequence before
// them, the share of experts one of those tokens chose too.
double reuseShare(const RoutingTrace& trace, int layer, const std::vector<bool>& cont, int window) {
  uint64_t seen = 0, total = 0;
  int run = 0;  // tokens of this sequence before t
  for (int t = 0; t < trace.tokens(); ++t) {
    run = cont[size_t(t)] ? run + 1 : 0;
    if (run < window) continue;
    for (const uint16_t e : trace.idsAt(t, layer)) {
      bool hit = false;
      for (int j = 1; j <= window && !hit; ++j) {
        const auto before = trace.idsAt(t - j, layer);
        hit = std::find(before.begin(), before.end(), e) != before.end();
      }
      seen += hit ? 1 : 0;
      ++total;
    }
  }
  return total ? double(seen) / double(total) : 0.0;
}

LayerRoutingProfile measureLayer(const RoutingTrace& trace, int layer, const std::vector<bool>& cont) {
  const int n = trace.n_expert, k = trace.k, tokens = trace.tokens();
  LayerRoutingProfile p;
  std::vector<double> counts(static_cast<size_t>(n), 0.0);
  for (int t = 0; t < tokens; ++t)
    for (const uint16_t e : trace.idsAt(t, layer)) counts[e] += 1;
  std::sort(counts.begin(), counts.end(), std::greater<>());
  const double total = double(tokens) * k;
  for (const double c : counts) p.popularity.push_back(c / total);
  p.adjacent_overlap = reuseShare(trace, layer, cont, 1);
  p.recent_reuse = reuseShare(trace, layer, cont, recentWindow(n, k));
  p.session_reuse = reuseShare(trace, layer, cont, sessionWindow(n, k));
  if (layer == 0) return p;

  std::vector<uint32_t> together(static_cast<size_t>(n) * static_cast<size_t>(n),
                                 0);  // [expert before][expert here]
  for (int t = 0; t < tokens; ++t)
    for (const uint16_t a : trace.idsAt(t, layer - 1))
      for (const uint16_t b : trace.idsAt(t, layer)) ++together[size_t(a) * size_t(n) + b];
  std::vector<int> partner(size_t(n), 0);
  for (int a = 0; a < n; ++a) {
    const auto row = together.begin() + ptrdiff_t(a) * n;
    partner[size_t(a)] = int(std::max_element(row, row + n) - row);
  }
  uint64_t follows = 0;
  for (int t = 0; t < tokens; ++t) {
    const auto before = trace.idsAt(t, layer - 1);
    for (const uint16_t b : trace.idsAt(t, layer))
      follows +=
          std::any_of(before.begin(), before.end(), [&](uint16_t a) { return partner[a] == b; }) ? 1 : 0;
  }
  p.layer_follow = double(follows) / total;
  return p;
}

// The profile's popularity curve as n ranks: the cumulative share, linear between
// the profile's ranks, taken at the target's rank boundaries.
std::vector<double> resampledPopularity(const std::vector<double>& pop, int n) {
  const int m = int(pop.size());
  std::vector<double> cdf(size_t(m) + 1, 0.0);
  for (int r = 0; r < m; ++r) cdf[size_t(r) + 1] = cdf[size_t(r)] + pop[size_t(r)];
  const auto at = [&](double x) {  // x in [0, 1]
    const double pos = x * m;
    const int i = std::min(int(pos), m - 1);
    return cdf[size_t(i)] + (pos - i) * (cdf[size_t(i) + 1] - cdf[size_t(i)]);
  };
  std::vector<double> out(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) out[size_t(r)] = at(double(r + 1) / n) - at(double(r) / n);
  return out;
}

// A deterministic stream of uniform numbers in (0, 1) (the same on every platform).
class Uniform {
 public:
  explicit Uniform(uint64_t seed) : s_(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {}
  double next() {  // splitmix64
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double(z >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  }

 private:
  uint64_t s_;
};

// One layer of the process: each token takes the k experts of largest key, where
// key(e) = log popularity(e) + topic * z(sequence, e)
//        + stick * [the token before took e] + recent * memory(e)
//        + follow * [e is the partner of an expert this token took a layer before]
//        + Gumbel noise,
// memory(e) = (1 - kMemoryDecay) * sum over the tokens before the one before of
// kMemoryDecay^(distance - 2) * [that token took e], at most 1 (an expert taken by
// every token), and z standard normal draws fixed for a sequence (its working set),
// which draws k experts without replacement with probabilities proportional to exp
// of the first five terms.
// Sequences are kSequenceTokens long (a reply; the held-in traces average 291
// tokens): each starts with an empty memory, as a new prompt does.
constexpr double kMemoryDecay = 0.7;
constexpr int kSequenceTokens = 256;

struct ProcessStrengths {
  double topic = 0, stick = 0, recent = 0, follow = 0;
};

// The draws one run of the process takes: Gumbel noise [tokens][n] and the
// sequences' normal draws [sequences][n].
struct ProcessNoise {
  std::vector<double> gumbel, topic;
};

class LayerProcess {
 public:
  LayerProcess(std::vector<double> log_pop, std::vector<int> partner_of_before, int k)
      : log_pop_(std::move(log_pop)), partner_(std::move(partner_of_before)), k_(k) {}

  int experts() const { return int(log_pop_.size()); }
  std::vector<double>& logPopularity() { return log_pop_; }

  // Draws `tokens` tokens; before: the layer before's choices [tokens][k] or empty.
  // noise: [tokens][n] Gumbel samples. out: [tokens][k] ids, weights.
  void draw(const ProcessStrengths& s, const std::vector<int>& before, const ProcessNoise& noise, int tokens,
            std::vector<int>& out, std::vector<float>* weights) const {
    const size_t n = log_pop_.size(), k = size_t(k_);
    out.assign(size_t(tokens) * k, 0);
    if (weights) weights->assign(out.size(), 0.0f);
    std::vector<double> key(n), memory(n, 0.0);
    std::vector<int> order(n);
    for (size_t t = 0; t < size_t(tokens); ++t) {
      const size_t in_seq = t % kSequenceTokens;
      if (in_seq == 0) std::fill(memory.begin(), memory.end(), 0.0);
      if (in_seq > 1) {
        for (double& m : memory) m *= kMemoryDecay;
        for (size_t j = 0; j < k; ++j) memory[size_t(out[(t - 2) * k + j])] += 1.0 - kMemoryDecay;
      }
      const double* z = noise.topic.data() + (t / kSequenceTokens) * n;
      for (size_t e = 0; e < n; ++e)
        key[e] = log_pop_[e] + s.topic * z[e] + s.recent * memory[e] + noise.gumbel[t * n + e];
      if (in_seq > 0)
        for (size_t j = 0; j < k; ++j) key[size_t(out[(t - 1) * k + j])] += s.stick;
      if (!before.empty())
        for (size_t j = 0; j < k; ++j) {
          const int p = partner_[size_t(before[t * k + j])];
          if (p >= 0) key[size_t(p)] += s.follow;
        }
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + ptrdiff_t(k), order.end(), [&](int a, int b) {
        return key[size_t(a)] > key[size_t(b)] || (key[size_t(a)] == key[size_t(b)] && a < b);
      });
      const double top = key[size_t(order[0])];
      double sum = 0;
      for (size_t j = 0; j < k; ++j) sum += std::exp(key[size_t(order[j])] - top);
      for (size_t j = 0; j < k; ++j) {
        out[t * k + j] = order[j];
        if (weights) (*weights)[t * k + j] = float(std::exp(key[size_t(order[j])] - top) / sum);
      }
    }
  }

  // The shares measureLayer reports, over a drawn sequence (the designed partners).
  double overlap(const std::vector<int>& ids, int tokens) const { return reuse(ids, tokens, 1); }
  double recentReuse(const std::vector<int>& ids, int tokens) const {
    return reuse(ids, tokens, recentWindow(experts(), k_));
  }
  double sessionReuse(const std::vector<int>& ids, int tokens) const {
    return reuse(ids, tokens, sessionWindow(experts(), k_));
  }
  double followShare(const std::vector<int>& ids, const std::vector<int>& before, int tokens) const {
    const size_t k = size_t(k_);
    uint64_t follows = 0;
    for (size_t t = 0; t < size_t(tokens); ++t)
      for (size_t j = 0; j < k; ++j) {
        bool hit = false;
        for (size_t i = 0; i < k && !hit; ++i) hit = partner_[size_t(before[t * k + i])] == ids[t * k + j];
        follows += hit ? 1 : 0;
      }
    return tokens ? double(follows) / (double(tokens) * k_) : 0.0;
  }

 private:
  // Of each token's experts (from token `window` on), the share one of the `window`
  // tokens before it took.
  double reuse(const std::vector<int>& ids, int tokens, int window) const {
    const size_t k = size_t(k_);
    std::vector<int> last(log_pop_.size(), -1);  // the token of this sequence that last took e
    uint64_t seen = 0, counted = 0;
    for (size_t t = 0; t < size_t(tokens); ++t) {
      const int in_seq = int(t % kSequenceTokens);
      if (in_seq == 0) std::fill(last.begin(), last.end(), -1);
      if (in_seq >= window) {
        counted += k;
        for (size_t j = 0; j < k; ++j) {
          const int l = last[size_t(ids[t * k + j])];
          seen += l >= 0 && in_seq - l <= window ? 1 : 0;
        }
      }
      for (size_t j = 0; j < k; ++j) last[size_t(ids[t * k + j])] = in_seq;
    }
    return counted ? double(seen) / double(counted) : 0.0;
  }

  std::vector<double> log_pop_;
  std::vector<int> partner_;  // per expert of the layer before: its partner here
  int k_;
};

// The value in [lo, hi] at which measure(value) reaches target, measure rising with
// the value (bisection; the noise is fixed, so it is a deterministic function).
template <typename Measure>
double fitRising(double target, double lo, double hi, Measure measure) {
  if (measure(lo) >= target) return lo;
  if (measure(hi) <= target) return hi;
  for (int i = 0; i < 10; ++i) {
    const double mid = 0.5 * (lo + hi);
    (measure(mid) < target ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

ProcessNoise processNoise(Uniform& u, int tokens, int n) {
  ProcessNoise noise;
  noise.gumbel.resize(size_t(tokens) * size_t(n));
  for (double& x : noise.gumbel) x = -std::log(-std::log(u.next()));
  noise.topic.resize(size_t((tokens + kSequenceTokens - 1) / kSequenceTokens) * size_t(n));
  for (double& x : noise.topic)  // Box-Muller
    x = std::sqrt(-2.0 * std::log(u.next())) * std::cos(6.283185307179586 * u.next());
  return noise;
}

}  // namespace

RoutingProfile measureRoutingProfile(const RoutingTrace& trace) {
  if (trace.tokens() < 2 || trace.n_layer < 1 || trace.k < 1)
    throw RoutingTraceError("routing trace " + trace.source + " is too short to profile (" +
                            std::to_string(trace.tokens()) + " tokens)");
  if (trace.n_expert > kMaxProfiledExperts)
    throw RoutingTraceError("routing trace " + trace.source + " has " + std::to_string(trace.n_expert) +
                            " experts; at most " + std::to_string(kMaxProfiledExperts) + " can be profiled");
  RoutingProfile p;
  p.source = trace.source;
  p.n_expert = trace.n_expert;
  p.k = trace.k;
  const auto cont = continuesPrevious(trace);
  for (int l = 0; l < trace.n_layer; ++l) p.layers.push_back(measureLayer(trace, l, cont));
  return p;
}

std::string formatRoutingProfile(const RoutingProfile& p) {
  std::ostringstream out;
  out << "moechat routing profile 1\n";
  out << "source " << p.source << "\n";
  out << "experts " << p.n_expert << " top " << p.k << " layers " << p.layers.size() << "\n";
  char buf[32];
  for (const auto& l : p.layers) {
    std::snprintf(buf, sizeof buf, "%.4f", l.adjacent_overlap);
    out << "overlap " << buf;
    std::snprintf(buf, sizeof buf, "%.4f", l.recent_reuse);
    out << " recent " << buf;
    std::snprintf(buf, sizeof buf, "%.4f", l.session_reuse);
    out << " session " << buf;
    std::snprintf(buf, sizeof buf, "%.4f", l.layer_follow);
    out << " follow " << buf << " popularity";
    for (const double x : l.popularity) {
      std::snprintf(buf, sizeof buf, " %.5f", x);
      out << buf;
    }
    out << "\n";
  }
  return out.str();
}

RoutingProfile parseRoutingProfile(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::string line;
  int line_no = 0;
  const auto fail = [&](const std::string& why) {
    throw RoutingTraceError("routing profile, line " + std::to_string(line_no) + ": " + why);
  };
  const auto next = [&]() {
    ++line_no;
    if (!std::getline(in, line)) fail("the profile ends early");
  };
  RoutingProfile p;
  next();
  if (line != "moechat routing profile 1") fail("not a routing profile (version 1)");
  next();
  if (line.rfind("source ", 0) != 0) fail("expected 'source ...'");
  p.source = line.substr(7);
  next();
  size_t n_layers = 0;
  {
    std::istringstream ls(line);
    std::string w1, w2, w3;
    if (!(ls >> w1 >> p.n_expert >> w2 >> p.k >> w3 >> n_layers) || w1 != "experts" || w2 != "top" ||
        w3 != "layers" || p.n_expert < 1 || p.n_expert > kMaxProfiledExperts || p.k < 1 || p.k > p.n_expert ||
        n_layers < 1 || n_layers > 4096)
      fail("expected 'experts N top K layers L' with 1 <= K <= N <= " + std::to_string(kMaxProfiledExperts));
  }
  for (size_t l = 0; l < n_layers; ++l) {
    next();
    std::istringstream ls(line);
    std::string w1, w2, w3, w4, w5;
    LayerRoutingProfile lp;
    if (!(ls >> w1 >> lp.adjacent_overlap >> w2 >> lp.recent_reuse >> w3 >> lp.session_reuse >> w4 >>
          lp.layer_follow >> w5) ||
        w1 != "overlap" || w2 != "recent" || w3 != "session" || w4 != "follow" || w5 != "popularity")
      fail("expected 'overlap X recent Y session Z follow W popularity P...'");
    double x = 0, sum = 0;
    while (ls >> x) {
      if (!(x >= 0) || (!lp.popularity.empty() && x > lp.popularity.back() + 1e-9))
        fail("popularity must be non-negative and non-increasing");
      lp.popularity.push_back(x);
      sum += x;
    }
    if (int(lp.popularity.size()) != p.n_expert)
      fail("expected " + std::to_string(p.n_expert) + " popularities");
    if (std::fabs(sum - 1.0) > 1e-3) fail("the popularities sum to " + std::to_string(sum) + ", not 1");
    const auto share = [](double x) { return x >= 0 && x <= 1; };
    if (!share(lp.adjacent_overlap) || !share(lp.recent_reuse) || !share(lp.session_reuse) ||
        !share(lp.layer_follow))
      fail("overlap, recent, session and follow are shares between 0 and 1");
    p.layers.push_back(std::move(lp));
  }
  return p;
}

const RoutingProfile& shippedRoutingProfile() {
  static const RoutingProfile profile = parseRoutingProfile(
#include "offload/routing/gpt_oss_20b_profile.inc"
  );
  return profile;
}

RoutingTrace synthesizeRouting(const RoutingProfile& profile, int n_layer, int n_expert, int k, int n_tokens,
                               uint64_t seed) {
  if (profile.layers.empty() || n_layer < 1 || n_expert < 1 || k < 1 || k > n_expert || n_tokens < 1 ||
      n_expert > 65535)
    throw std::invalid_argument("synthesizeRouting: cannot draw " + std::to_string(n_layer) + " layers x " +
                                std::to_string(n_expert) + " experts, top-" + std::to_string(k) + ", " +
                                std::to_string(n_tokens) + " tokens");
  constexpr int kFitTokens = 8 * kSequenceTokens;
  const int fit_tokens = std::min(n_tokens, kFitTokens);
  const int P = int(profile.layers.size());
  Uniform u(seed);
  std::vector<std::vector<int>> chosen(static_cast<size_t>(n_layer));
  std::vector<std::vector<float>> weights(static_cast<size_t>(n_layer));
  for (int l = 0; l < n_layer; ++l) {
    const auto& src =
        profile.layers[size_t(n_layer == 1 ? 0 : (l * (P - 1) + (n_layer - 1) / 2) / (n_layer - 1))];
    // Ranks to experts: a layer's favourites are experts of its own.
    std::vector<int> expert_of_rank(static_cast<size_t>(n_expert));
    std::iota(expert_of_rank.begin(), expert_of_rank.end(), 0);
    for (int i = n_expert - 1; i > 0; --i)
      std::swap(expert_of_rank[size_t(i)], expert_of_rank[size_t(u.next() * (i + 1))]);
    const std::vector<double> pop = resampledPopularity(src.popularity, n_expert);
    std::vector<double> log_pop(static_cast<size_t>(n_expert));
    std::vector<double> cdf(static_cast<size_t>(n_expert));
    for (int r = 0; r < n_expert; ++r) {
      log_pop[size_t(expert_of_rank[size_t(r)])] = std::log(std::max(pop[size_t(r)], 1e-12));
      cdf[size_t(r)] = (r ? cdf[size_t(r) - 1] : 0.0) + pop[size_t(r)];
    }
    // Each expert of the layer before gets a partner here, drawn by popularity.
    std::vector<int> partner(size_t(n_expert), -1);
    if (l > 0)
      for (int& p : partner) {
        const double x = u.next() * cdf.back();
        const int r = int(std::lower_bound(cdf.begin(), cdf.end(), x) - cdf.begin());
        p = expert_of_rank[size_t(std::min(r, n_expert - 1))];
      }
    LayerProcess process(std::move(log_pop), std::move(partner), k);
    static const std::vector<int> kFirstLayer;
    const std::vector<int>& before = l > 0 ? chosen[size_t(l) - 1] : kFirstLayer;

    // Fitted on the first fit_tokens tokens with noise of their own: the strengths
    // to the shares, then each expert's popularity to its rank's share (stickiness
    // concentrates the choices on the popular experts), three rounds.
    const ProcessNoise fit_noise = processNoise(u, fit_tokens, n_expert);
    const std::vector<int> fit_before =
        before.empty() ? std::vector<int>{}
                       : std::vector<int>(before.begin(), before.begin() + ptrdiff_t(fit_tokens) * k);
    std::vector<int> ids;
    ProcessStrengths s;
    for (int round = 0; round < 3; ++round) {
      if (round > 0) {
        process.draw(s, fit_before, fit_noise, fit_tokens, ids, nullptr);
        std::vector<double> got(size_t(n_expert), 0.5);  // half a selection: no log of zero
        for (const int e : ids) got[size_t(e)] += 1;
        for (int r = 0; r < n_expert; ++r) {
          const size_t e = size_t(expert_of_rank[size_t(r)]);
          const double want = pop[size_t(r)] * fit_tokens * k + 0.5;
          process.logPopularity()[e] += 0.7 * std::log(want / got[e]);
        }
      }
      if (l > 0)
        s.follow = fitRising(src.layer_follow, 0.0, 12.0, [&](double x) {
          ProcessStrengths t = s;
          t.follow = x;
          process.draw(t, fit_before, fit_noise, fit_tokens, ids, nullptr);
          return process.followShare(ids, fit_before, fit_tokens);
        });
      s.topic = fitRising(src.session_reuse, 0.0, 4.0, [&](double x) {
        ProcessStrengths t = s;
        t.topic = x;
        process.draw(t, fit_before, fit_noise, fit_tokens, ids, nullptr);
        return process.sessionReuse(ids, fit_tokens);
      });
      s.recent = fitRising(src.recent_reuse, -12.0, 24.0, [&](double x) {
        ProcessStrengths t = s;
        t.recent = x;
        process.draw(t, fit_before, fit_noise, fit_tokens, ids, nullptr);
        return process.recentReuse(ids, fit_tokens);
      });
      s.stick = fitRising(src.adjacent_overlap, -12.0, 24.0, [&](double x) {
        ProcessStrengths t = s;
        t.stick = x;
        process.draw(t, fit_before, fit_noise, fit_tokens, ids, nullptr);
        return process.overlap(ids, fit_tokens);
      });
    }
    const ProcessNoise noise = processNoise(u, n_tokens, n_expert);
    process.draw(s, before, noise, n_tokens, chosen[size_t(l)], &weights[size_t(l)]);
  }

  RoutingTrace trace;
  trace.n_layer = n_layer;
  trace.n_expert = n_expert;
  trace.k = k;
  trace.source = "synthetic routing following " + profile.source;
  std::vector<uint16_t> ids(size_t(n_tokens) * size_t(n_layer) * size_t(k));
  std::vector<float> w(ids.size());
  for (int t = 0; t < n_tokens; ++t)
    for (int l = 0; l < n_layer; ++l)
      for (int j = 0; j < k; ++j) {
        const size_t dst = (size_t(t) * size_t(n_layer) + size_t(l)) * size_t(k) + size_t(j);
        const size_t src = size_t(t) * size_t(k) + size_t(j);
        ids[dst] = uint16_t(chosen[size_t(l)][src]);
        w[dst] = weights[size_t(l)][src];
      }
  const size_t per_token = size_t(n_layer) * size_t(k);
  for (int t0 = 0; t0 < n_tokens; t0 += kSequenceTokens) {
    const size_t a = size_t(t0) * per_token, b = size_t(std::min(n_tokens, t0 + kSequenceTokens)) * per_token;
    trace.addSequence(std::span(ids).subspan(a, b - a), std::span(w).subspan(a, b - a));
  }
  return trace;
}

}  // namespace moe
