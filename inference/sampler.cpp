// Token sampler. Order of the steps (as llama.cpp's classic chain):
//   1. sanitise: NaN -> -inf, +inf -> largest finite float (so softmax stays finite);
//   2. repetition penalty over the last repeat_last_n history tokens, each distinct
//      token once: positive logit / penalty, negative logit * penalty;
//   3. temperature <= 0: argmax, lowest id on ties;
//   4. top-k, softmax with temperature, top-p, min-p, renormalise, seeded draw.
// Steps 1-3 and the top-k's selection run over the whole row here, or on a backend
// that reduces the row to its best top_k + 1 entries (reduction()); step 4 is one
// implementation (draw) for both, so both give the same token.
//
// Decisions:
// - All logits -inf/NaN (or an empty vocabulary): there is no token to choose, and a
//   silent fallback (token 0) would hide a broken forward pass, so sample() throws
//   std::domain_error (std::invalid_argument for an empty span).
// - repeat_last_n == 0 disables the penalty; a negative value means the whole history
//   (llama.cpp uses -1 for "the context size").
// - The draw uses a uniform built from the raw 64-bit output of mt19937_64 (whose
//   sequence the standard fixes), never std::uniform_*_distribution (its algorithm is
//   implementation-defined), so a seed gives the same tokens on every platform.
// - A sampled decode a step ahead draws on the device (withDraw, takeDrawn): each token
//   still takes the next uniform of the stream, drawn here before its step is queued,
//   so the tokens are sample(candidates)'s for the same seed.
#include "inference/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <unordered_set>

namespace moe {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Higher logit first; lowest id first among equal logits (deterministic order).
bool before(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  if (a.first != b.first) return a.first > b.first;
  return a.second < b.second;
}

void sanitise(std::span<float> logits) {
  for (float& x : logits) {
    if (std::isnan(x))
      x = kNegInf;
    else if (x == std::numeric_limits<float>::infinity())
      x = std::numeric_limits<float>::max();
  }
}

float penalised(float x, float penalty) { return x > 0.0f ? x / penalty : x * penalty; }

void applyRepetitionPenalty(std::span<float> logits, std::span<const int32_t> history, float penalty,
                            int last_n) {
  if (penalty == 1.0f || last_n == 0 || history.empty()) return;
  size_t n = last_n < 0 ? history.size() : std::min(history.size(), size_t(last_n));
  std::unordered_set<int32_t> seen;
  for (int32_t tok : history.subspan(history.size() - n)) {
    if (tok < 0 || size_t(tok) >= logits.size() || !seen.insert(tok).second) continue;
    logits[size_t(tok)] = penalised(logits[size_t(tok)], penalty);
  }
}

int32_t argmax(std::span<const float> logits) {
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;  // strict: the first (lowest id) wins ties
  return int32_t(best);
}

// Uniform in [0, 1) from the top 53 bits of one raw draw.
double uniform01(std::mt19937_64& rng) { return double(rng() >> 11) * 0x1.0p-53; }

}  // namespace

Sampler::Sampler(SamplerParams params) : params_(params), rng_(params.seed) {}

void Sampler::collectAll(std::span<const float> logits) {
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] != kNegInf) candidates_.emplace_back(logits[i], int32_t(i));
}

// A superset of the k best finite logits in one pass, at about one comparison per
// token: a buffer of at most 4k, cut back to its k best whenever it fills, whose k-th
// logit is then the bar. A token at the bar is refused: it comes after the bar's
// token (ids rise), so it cannot displace it. Whatever the buffer ends with holds
// the k best, so the caller's nth_element finds the same set as over every token.
// Returns whether a finite token was left out.
bool Sampler::collectTopK(std::span<const float> logits, size_t k) {
  candidates_.clear();
  candidates_.reserve(4 * k);
  float bar = kNegInf;
  bool left_out = false;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    if (!(x > bar)) {  // -inf never passes: the bar starts there
      left_out = left_out || x != kNegInf;
      continue;
    }
    candidates_.emplace_back(x, int32_t(i));
    if (candidates_.size() == 4 * k) {
      std::nth_element(candidates_.begin(), candidates_.begin() + std::ptrdiff_t(k) - 1, candidates_.end(),
                       before);
      candidates_.resize(k);
      bar = candidates_[k - 1].first;
      left_out = true;
    }
  }
  return left_out;
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> history) {
  if (logits.empty()) throw std::invalid_argument("Sampler::sample: empty logits");
  sanitise(logits);
  applyRepetitionPenalty(logits, history, params_.repeat_penalty, params_.repeat_last_n);

  const int32_t best = argmax(logits);
  if (logits[size_t(best)] == kNegInf) throw std::domain_error("Sampler::sample: every logit is -inf or NaN");
  if (params_.temperature <= 0.0f) return best;

  // Candidates: every token that can be drawn at all; with a small top-k, only the
  // tokens that can still be among the k best (collectTopK), in id order while none
  // was left out.
  const size_t k = params_.top_k > 0 ? size_t(params_.top_k) : 0;
  bool left_out = false;  // some finite token is not a candidate
  if (k > 0 && k <= logits.size() / 8)
    left_out = collectTopK(logits, k);
  else
    collectAll(logits);
  return draw(k, left_out, logits[size_t(best)], logits);
}

LogitsReduction Sampler::reduction(std::span<const int32_t> history, std::span<const int32_t> more) {
  return reductionWith(history, more, 0);
}

LogitsReduction Sampler::reductionOfChosen(std::span<const int32_t> history, std::span<const int32_t> more) {
  return reductionWith(history, more, 1);
}

// The window of the last repeat_last_n tokens ends with the `unknown` ones; the host
// lists the distinct ids of the rest of it.
LogitsReduction Sampler::reductionWith(std::span<const int32_t> history, std::span<const int32_t> more,
                                       size_t unknown) {
  LogitsReduction r;
  r.k = params_.temperature <= 0.0f ? 1 : params_.top_k > 0 ? params_.top_k + 1 : 0;
  r.penalty = params_.repeat_penalty;
  penalised_.clear();
  const int last_n = params_.repeat_last_n;
  if (r.penalty != 1.0f && last_n != 0) {
    const size_t known = history.size() + more.size();
    const size_t total = known + unknown;
    const size_t n = last_n < 0 ? total : std::min(total, size_t(last_n));
    r.penalise_chosen = unknown > 0 && n > 0;
    for (size_t i = total - n; i < known; ++i) {
      const int32_t tok = i < history.size() ? history[i] : more[i - history.size()];
      if (tok >= 0) penalised_.push_back(tok);
    }
    std::sort(penalised_.begin(), penalised_.end());
    penalised_.erase(std::unique(penalised_.begin(), penalised_.end()), penalised_.end());
  }
  r.penalised = penalised_;
  return r;
}

void Sampler::checkCandidates(std::span<const LogitCandidate> best) const {
  if (best.empty()) throw std::invalid_argument("Sampler::sample: no candidates");
  if (best[0].id < 0 || best[0].value == kNegInf)
    throw std::domain_error("Sampler::sample: every logit is -inf or NaN");
  if (params_.temperature <= 0.0f) return;
  if (params_.top_k <= 0 || best.size() <= size_t(params_.top_k))
    throw std::invalid_argument("Sampler::sample: candidates need top_k > 0 and top_k + 1 of them");
}

int32_t Sampler::sample(std::span<const LogitCandidate> best) {
  checkCandidates(best);
  if (params_.temperature <= 0.0f) return best[0].id;

  // The entries after the k best tell only whether a finite one was left out; while
  // none was, the candidates are every finite token, in id order as collectAll has them.
  const size_t k = size_t(params_.top_k);
  candidates_.clear();
  for (const LogitCandidate& c : best)
    if (c.id >= 0 && c.value != kNegInf) candidates_.emplace_back(c.value, c.id);
  const bool left_out = candidates_.size() > k;
  if (!left_out)
    std::sort(candidates_.begin(), candidates_.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
  return draw(k, left_out, best[0].value, {});
}

double Sampler::nextUniform() {
  if (drawn_ahead_.empty()) return uniform01(rng_);
  const double u = drawn_ahead_.front();
  drawn_ahead_.pop_front();
  return u;
}

LogitsReduction Sampler::withDraw(LogitsReduction r, size_t ahead) {
  if (!drawsFromCandidates())
    throw std::logic_error("Sampler::withDraw: the draw needs temperature > 0 and top_k > 0");
  while (drawn_ahead_.size() <= ahead) drawn_ahead_.push_back(uniform01(rng_));
  r.draw = true;
  r.uniform = drawn_ahead_[ahead];
  r.temperature = params_.temperature;
  r.top_p = params_.top_p;
  r.min_p = params_.min_p;
  return r;
}

int32_t Sampler::takeDrawn(std::span<const LogitCandidate> best, int32_t drawn) {
  checkCandidates(best);
  if (drawn_ahead_.empty()) throw std::logic_error("Sampler::takeDrawn: no draw handed out");
  // The device draws among the top_k best; anything else is a fault, not a sample.
  const size_t k = std::min(best.size(), size_t(params_.top_k));
  if (drawn < 0 || std::none_of(best.begin(), best.begin() + std::ptrdiff_t(k),
                                [drawn](const LogitCandidate& c) { return c.id == drawn; }))
    throw std::logic_error("Sampler::takeDrawn: token " + std::to_string(drawn) + " is not a candidate");
  drawn_ahead_.pop_front();
  return drawn;
}

int32_t Sampler::draw(size_t k, bool left_out, float x_max_logit, std::span<const float> row) {
  // Top-k: nth_element keeps the k best in front (O(n)), then only those are sorted.
  size_t n = candidates_.size();
  bool all_sorted = false;  // candidates_[0, n) already in `before` order
  if (k > 0 && (k < n || left_out)) {
    n = std::min(n, k);
    std::nth_element(candidates_.begin(), candidates_.begin() + n - 1, candidates_.end(), before);
    candidates_.resize(n);
    // nth_element's order is library-specific; sorting the k survivors (k is small)
    // makes every later sum run in one canonical order on every platform.
    std::sort(candidates_.begin(), candidates_.end(), before);
    all_sorted = true;
  }

  // Softmax with temperature, in double: p_i ∝ exp((x_i - x_max) / T) (no overflow).
  const double x_max = double(x_max_logit);
  const double inv_t = 1.0 / double(params_.temperature);
  auto weight = [&](size_t i) { return std::exp((double(candidates_[i].first) - x_max) * inv_t); };
  double z = 0.0;
  for (size_t i = 0; i < n; ++i) z += weight(i);

  // From here the kept set is always a prefix of the candidates in `before` order.
  // Top-p needs that order only as far as the cumulative mass reaches top_p, so the
  // front is sorted in growing chunks (a 150k vocabulary is rarely sorted whole).
  size_t sorted = all_sorted ? n : 0;
  auto sortTo = [&](size_t m) {
    m = std::min(m, n);
    if (m <= sorted) return;
    std::partial_sort(candidates_.begin() + sorted, candidates_.begin() + m, candidates_.begin() + n, before);
    sorted = m;
  };
  sortTo(64);

  size_t kept = n;
  if (params_.top_p < 1.0f) {
    const double target = double(params_.top_p) * z;
    double cum = 0.0;
    size_t i = 0;
    for (;; ++i) {
      if (i == sorted) sortTo(sorted * 4);
      if (i >= n) break;
      cum += weight(i);
      if (cum >= target) break;
    }
    kept = std::min(n, i + 1);  // the smallest prefix reaching top_p; at least one token
  }

  // Min-p: keep p >= min_p * p_max. Candidate 0 is the most likely token; the ratio
  // test does not depend on the normalisation, so top-p's truncation does not change it.
  if (params_.min_p > 0.0f) {
    const double threshold = double(params_.min_p) * weight(0);
    size_t i = 1;
    for (; i < kept; ++i) {
      if (i == sorted) sortTo(sorted * 4);
      if (weight(i) < threshold) break;
    }
    kept = i;
  }

  // Renormalise over the kept set and draw, walking it in token-id order: a canonical
  // order whatever partial_sort left behind. When nothing was cut the kept set is
  // every finite logit: the row, where there is one, is walked instead of sorted.
  if (kept == n && !all_sorted && !row.empty()) {
    double total = 0.0;  // candidates_ may be permuted, but every finite logit is kept
    for (size_t i = 0; i < row.size(); ++i)
      if (row[i] != kNegInf) total += std::exp((double(row[i]) - x_max) * inv_t);
    const double r = nextUniform() * total;
    double cum = 0.0;
    int32_t last = candidates_[0].second;
    for (size_t i = 0; i < row.size(); ++i) {
      if (row[i] == kNegInf) continue;
      cum += std::exp((double(row[i]) - x_max) * inv_t);
      last = int32_t(i);
      if (r < cum) return last;
    }
    return last;  // rounding: r landed on the very top
  }
  std::sort(candidates_.begin(), candidates_.begin() + kept,
            [](const auto& a, const auto& b) { return a.second < b.second; });
  double total = 0.0;
  for (size_t i = 0; i < kept; ++i) total += weight(i);
  const double r = nextUniform() * total;
  double cum = 0.0;
  for (size_t i = 0; i < kept; ++i) {
    cum += weight(i);
    if (r < cum) return candidates_[i].second;
  }
  return candidates_[kept - 1].second;  // rounding: r landed on the very top
}

}  // namespace moe
