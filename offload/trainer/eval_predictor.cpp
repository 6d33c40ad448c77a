#include "offload/trainer/eval_predictor.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <stdexcept>

#include "offload/learned_predictor.h"
#include "offload/trainer/train_predictor.h"

namespace moe {
namespace {

// Expert usage counts of one layer over the training prompts: overall and per token id.
struct Usage {
  std::vector<double> overall;
  std::map<int32_t, std::vector<double>> by_token;
};

Usage usageOf(const TraceReader& trace, const std::vector<int>& prompts, int layer) {
  const int K = trace.header().k, N = trace.header().n_expert;
  Usage u;
  u.overall.assign(N, 0.0);
  for (int p : prompts) {
    const auto rows = trace.read(p, layer);
    for (int t = 0; t < rows.n; ++t) {
      auto& tok = u.by_token[rows.tokens[t]];
      if (tok.empty()) tok.assign(N, 0.0);
      for (int j = 0; j < K; ++j) {
        const int e = rows.experts[size_t(t) * K + j];
        u.overall[e] += 1;
        tok[e] += 1;
      }
    }
  }
  return u;
}

std::vector<int> topOf(const std::vector<double>& counts, int k) {
  std::vector<float> f(counts.begin(), counts.end());
  return topExperts(f, k);
}

void accumulate(EvalScores& sum, const EvalScores& add, double w) {
  sum.learned += add.learned * w;
  sum.skip_gate += add.skip_gate * w;
  sum.token_based += add.token_based * w;
  sum.previous_token += add.previous_token * w;
  sum.popularity += add.popularity * w;
  sum.random += add.random * w;
}

}  // namespace

std::vector<std::string> EvalReport::notBeaten() const {
  std::vector<std::string> out;
  const EvalScores& s = overall.acc;
  if (s.skip_gate >= 0 && s.learned <= s.skip_gate) out.push_back("skip-gate");
  if (s.learned <= s.token_based) out.push_back("token-based");
  if (s.learned <= s.previous_token) out.push_back("previous-token");
  if (s.learned <= s.popularity) out.push_back("popularity");
  if (s.learned <= s.random) out.push_back("random");
  return out;
}

EvalReport evaluatePredictorSet(const TraceReader& trace, const PredictorSet& set,
                                ExpertPredictor* skip_gate) {
  const TraceHeader& h = trace.header();
  if (set.model_sha256 != h.model_sha256)
    throw std::invalid_argument("the predictor was trained for another model (" + set.model_name +
                                ") than the trace's (" + h.model_name + ")");
  const auto have = trace.prompts();
  for (const auto* list : {&set.test_prompts, &set.train_prompts})
    for (int p : *list)
      if (!std::binary_search(have.begin(), have.end(), p))
        throw std::invalid_argument(
            "prompt " + std::to_string(p) +
            " of the predictor's split is not in this trace: evaluate on the trace it was "
            "trained from");
  LearnedPredictor learned(set, h.n_embd, h.n_expert);
  EvalReport r;
  r.model_name = h.model_name;
  r.model_sha256 = h.model_sha256;
  r.distance = set.distance;
  r.k = h.k;
  r.n_expert = h.n_expert;
  r.test_prompts = int(set.test_prompts.size());
  const int K = h.k;
  EvalScores total;
  total.skip_gate = 0;  // a sum (EvalScores starts it at -1, "not measured")
  int64_t total_tokens = 0;
  for (const auto& mlp : set.layers) {
    const int L = mlp.layer, T = mlp.target_layer;
    const Usage usage = usageOf(trace, set.train_prompts, T);
    const auto popular = topOf(usage.overall, K);
    EvalLayer row;
    row.layer = L;
    row.target_layer = T;
    EvalScores& a = row.acc;
    for (int p : set.test_prompts) {
      const auto in = trace.read(p, L);
      const auto out = trace.read(p, T);
      for (int t = 0; t < in.n; ++t) {
        const std::span<const int> truth(out.experts.data() + size_t(t) * K, K);
        const std::span<const float> x(in.hidden.data() + size_t(t) * h.n_embd, h.n_embd);
        a.learned += predictionAccuracy(learned.predict(L, T, x, 1, K), truth);
        if (skip_gate) a.skip_gate += predictionAccuracy(skip_gate->predict(L, T, x, 1, K), truth);
        const auto tok = usage.by_token.find(in.tokens[t]);
        a.token_based +=
            predictionAccuracy(tok == usage.by_token.end() ? popular : topOf(tok->second, K), truth);
        a.previous_token +=
            t == 0 ? predictionAccuracy(popular, truth)
                   : predictionAccuracy(std::span(out.experts.data() + size_t(t - 1) * K, K), truth);
        a.popularity += predictionAccuracy(popular, truth);
        ++row.tokens;
      }
    }
    if (row.tokens > 0) {
      const double n = double(row.tokens);
      a.learned /= n, a.skip_gate /= n, a.token_based /= n, a.previous_token /= n, a.popularity /= n;
    }
    if (!skip_gate) a.skip_gate = -1;
    a.random = double(K) / h.n_expert;
    EvalScores w = a;
    if (!skip_gate) w.skip_gate = 0;
    accumulate(total, w, double(row.tokens));
    total_tokens += row.tokens;
    r.layers.push_back(row);
  }
  if (total_tokens > 0) {
    const double n = double(total_tokens);
    total.learned /= n, total.skip_gate /= n, total.token_based /= n, total.previous_token /= n;
    total.popularity /= n, total.random /= n;
  }
  if (!skip_gate) total.skip_gate = -1;
  r.overall.layer = -1;
  r.overall.target_layer = -1;
  r.overall.tokens = total_tokens;
  r.overall.acc = total;
  return r;
}

namespace {

std::string cell(double v) {
  char buf[32];
  if (v < 0) return "     -";
  std::snprintf(buf, sizeof buf, "%6.3f", v);
  return buf;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return v < 0 ? "null" : buf;
}

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (uint8_t(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string scoresJson(const EvalLayer& l) {
  const EvalScores& s = l.acc;
  return "\"tokens\": " + std::to_string(l.tokens) + ", \"accuracy\": {\"learned\": " + num(s.learned) +
         ", \"skip_gate\": " + num(s.skip_gate) + ", \"token_based\": " + num(s.token_based) +
         ", \"previous_token\": " + num(s.previous_token) + ", \"popularity\": " + num(s.popularity) +
         ", \"random\": " + num(s.random) + "}";
}

}  // namespace

std::string evalReportText(const EvalReport& r) {
  std::string out = "model: " + r.model_name + " (sha256 " + r.model_sha256.substr(0, 12) + ")\n";
  out += "distance " + std::to_string(r.distance) + ", top-" + std::to_string(r.k) + " of " +
         std::to_string(r.n_expert) + " experts, " + std::to_string(r.test_prompts) +
         " held-out test prompts; Accuracy = share of the chosen experts among the k predicted\n\n";
  out += "layer -> target  tokens  learned skip-gate token-based prev-token popularity  random\n";
  auto line = [&](const std::string& name, const EvalLayer& l) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%-15s %7lld ", name.c_str(), (long long)l.tokens);
    out += buf;
    const EvalScores& s = l.acc;
    out += " " + cell(s.learned) + "    " + cell(s.skip_gate) + "      " + cell(s.token_based) + "     " +
           cell(s.previous_token) + "     " + cell(s.popularity) + "  " + cell(s.random) + "\n";
  };
  for (const auto& l : r.layers) line(std::to_string(l.layer) + " -> " + std::to_string(l.target_layer), l);
  line("overall", r.overall);
  const auto lost = r.notBeaten();
  if (lost.empty()) {
    out += "\nthe learned predictor beats every baseline overall\n";
  } else {
    out += "\nthe learned predictor does NOT beat:";
    for (const auto& n : lost) out += " " + n;
    out += "\n";
  }
  return out;
}

std::string evalReportJson(const EvalReport& r) {
  std::string out = "{\"model\": " + jsonString(r.model_name) +
                    ", \"model_sha256\": " + jsonString(r.model_sha256) +
                    ", \"distance\": " + std::to_string(r.distance) + ", \"k\": " + std::to_string(r.k) +
                    ", \"n_expert\": " + std::to_string(r.n_expert) +
                    ", \"test_prompts\": " + std::to_string(r.test_prompts) + ", \"layers\": [";
  for (size_t i = 0; i < r.layers.size(); ++i) {
    const auto& l = r.layers[i];
    out += std::string(i ? ", " : "") + "{\"layer\": " + std::to_string(l.layer) +
           ", \"target_layer\": " + std::to_string(l.target_layer) + ", " + scoresJson(l) + "}";
  }
  out += "], \"overall\": {" + scoresJson(r.overall) + "}, \"not_beaten\": [";
  const auto lost = r.notBeaten();
  for (size_t i = 0; i < lost.size(); ++i) out += std::string(i ? ", " : "") + jsonString(lost[i]);
  return out + "]}\n";
}

}  // namespace moe
