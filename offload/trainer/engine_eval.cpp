#include "offload/trainer/engine_eval.h"

#include <cstdio>
#include <stdexcept>

#include "offload/learned_predictor.h"
#include "runtime/runtime.h"

namespace moe {
namespace {

EngineEvalRow runOne(const Model& model, Backend& backend, const TraceReader& trace, const PredictorSet& set,
                     const EngineEvalOptions& o, OffloadPolicy policy,
                     std::shared_ptr<ExpertPredictor> predictor, const std::string& name) {
  OffloadConfig oc;
  oc.policy = policy;
  oc.cache_slots = o.cache_slots;
  oc.link.bytes_per_second = o.link_bytes_per_second;
  oc.link.paced = o.link_bytes_per_second > 0;
  oc.stride = set.distance;
  oc.predictor = std::move(predictor);
  // The comparison is about prediction: the CPU fallback would hide misses behind compute.
  oc.switches.cpu_fallback = false;
  Compute compute(backend);
  Runtime runtime(model, compute, oc);
  OffloadEngine& engine = runtime.offload();
  const int first_moe = trace.header().moe_layers.front();
  for (int p : set.test_prompts) {
    const auto tokens = trace.read(p, first_moe).tokens;
    if (tokens.empty()) continue;
    const auto tf = runtime.makeTransformer(int(tokens.size()) + 1);
    std::vector<float> logits;
    const size_t prefill = std::max<size_t>(1, tokens.size() / 2);
    tf->forward(std::span(tokens.data(), prefill), logits);
    for (size_t i = prefill; i < tokens.size(); ++i) tf->forward(std::span(tokens.data() + i, 1), logits);
  }
  engine.waitIdle();
  const OffloadSnapshot s = engine.snapshot();
  EngineEvalRow r;
  r.name = name;
  r.hit_rate = s.hitRate();
  r.accuracy = s.accuracy();
  r.fetch_rate = s.fetchRate();
  r.good_pred = s.goodPred();
  r.misses = s.misses;
  r.bytes_h2d = s.bytes_h2d;
  r.expert_uses = s.expert_uses;
  return r;
}

}  // namespace

std::vector<EngineEvalRow> compareInEngine(const Model& model, Backend& backend, const TraceReader& trace,
                                           const PredictorSet& set, const EngineEvalOptions& o) {
  const auto& c = model.config();
  if (set.model_sha256 != trace.header().model_sha256 || c.n_embd != trace.header().n_embd ||
      c.n_expert != trace.header().n_expert)
    throw std::invalid_argument("the predictor, the trace and the model must belong to one model");
  auto learned = std::make_shared<LearnedPredictor>(set, c.n_embd, c.n_expert);
  return {runOne(model, backend, trace, set, o, OffloadPolicy::kReactiveLru, nullptr, "reactive-lru"),
          runOne(model, backend, trace, set, o, OffloadPolicy::kProactive, nullptr, "proactive (skip-gate)"),
          runOne(model, backend, trace, set, o, OffloadPolicy::kProactive, learned, "proactive (learned)")};
}

std::string engineEvalText(const std::vector<EngineEvalRow>& rows) {
  std::string out = "\nin the engine (test prompts, same cache slots):\n";
  out += "policy                  hit-rate  Accuracy  FetchRate  GoodPred   misses  MB copied\n";
  for (const auto& r : rows) {
    char buf[160];
    const bool pred = r.name != "reactive-lru";
    std::snprintf(buf, sizeof buf, "%-22s  %8.3f  %8s  %9s  %8s  %7llu  %9.2f\n", r.name.c_str(), r.hit_rate,
                  pred ? std::to_string(r.accuracy).substr(0, 5).c_str() : "-",
                  pred ? std::to_string(r.fetch_rate).substr(0, 5).c_str() : "-",
                  pred ? std::to_string(r.good_pred).substr(0, 5).c_str() : "-", (unsigned long long)r.misses,
                  r.bytes_h2d / 1e6);
    out += buf;
  }
  return out;
}

std::string engineEvalJson(const std::vector<EngineEvalRow>& rows) {
  std::string out = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "%s{\"policy\": \"%s\", \"hit_rate\": %.4f, \"accuracy\": %.4f, \"fetch_rate\": %.4f, "
                  "\"good_pred\": %.4f, \"misses\": %llu, \"bytes_h2d\": %llu, \"expert_uses\": %llu}",
                  i ? ", " : "", r.name.c_str(), r.hit_rate, r.accuracy, r.fetch_rate, r.good_pred,
                  (unsigned long long)r.misses, (unsigned long long)r.bytes_h2d,
                  (unsigned long long)r.expert_uses);
    out += buf;
  }
  return out + "]";
}

}  // namespace moe
