#include "app/core/predictor_training.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include <unistd.h>

#include "app/core/model_predictor.h"
#include "models/sha256.h"
#include "offload/skip_gate_predictor.h"

namespace moe {
namespace {

std::string hashText(const std::string& text) {
  return sha256Hex({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
}

// A trace of `prompts` into a fresh temporary file; removed afterwards.
TraceRunResult traceScratch(EngineSession& s, const std::string& sha, const std::vector<std::string>& prompts,
                            int new_tokens) {
  static std::atomic<int> n{0};
  const auto path = std::filesystem::temp_directory_path() /
                    ("moechat-rates-" + std::to_string(::getpid()) + "-" + std::to_string(++n) + ".moetrace");
  struct Remove {
    std::filesystem::path p;
    ~Remove() {
      std::error_code ec;
      std::filesystem::remove(p, ec);
    }
  } remove{path};
  TraceWriter writer(path.string(), traceHeaderFor(s.model(), sha, "rates"));
  TraceOptions o;
  o.max_new_tokens = new_tokens;
  return collectTraces(s.model(), s.backend(), s.offload().source(), prompts, writer, o);
}

}  // namespace

std::string sessionModelSource(const SessionOptions& opts) {
  if (!opts.demo) return opts.model_path;
  return opts.demo_model == DemoModel::kTrained ? "demo" : "demo-random";
}

std::string sessionModelSha256(const SessionOptions& opts) {
  if (opts.demo) return demoModelSha256(opts.demo_model);
  return sha256OfFile(opts.model_path);
}

double estimateTraceSeconds(const TraceRates& rates, const std::vector<std::string>& prompts, int count,
                            const TraceOptions& options) {
  const double bpt = rates.bytes_per_token > 0 ? rates.bytes_per_token : 4;
  double prefill_tokens = 0;
  const int n = std::clamp(count, 0, int(prompts.size()));
  for (int i = 0; i < n; ++i)
    prefill_tokens += std::min<double>(options.max_prompt_tokens, std::ceil(prompts[i].size() / bpt) + 1);
  return prefill_tokens * rates.prefill_seconds_per_token +
         double(n) * options.max_new_tokens * rates.decode_seconds_per_token;
}

std::string durationText(double seconds) {
  char buf[64];
  if (seconds < 1)
    return "under a second";
  else if (seconds < 90)
    std::snprintf(buf, sizeof buf, "about %.0f s", std::ceil(seconds));
  else if (seconds < 3600)
    std::snprintf(buf, sizeof buf, "about %.0f min", std::round(seconds / 60));
  else
    std::snprintf(buf, sizeof buf, "about %d h %02d min", int(seconds / 3600),
                  int(std::lround(std::fmod(seconds, 3600) / 60)) % 60);
  return buf;
}

std::string traceFileFor(const std::string& dir, const std::string& model_sha256,
                         const std::vector<std::string>& prompts, const TraceOptions& options) {
  std::string key = std::to_string(options.max_new_tokens) + "/" + std::to_string(options.max_prompt_tokens);
  for (const auto& p : prompts) key += "\n" + std::to_string(p.size()) + ":" + p;
  const std::string name = model_sha256.substr(0, 16) + "-" + hashText(key).substr(0, 16) + ".moetrace";
  return (std::filesystem::path(dir) / name).string();
}

PredictorTraining::PredictorTraining(const std::string& model_path, const std::string& model_sha256,
                                     int threads) {
  SessionOptions o;
  o.demo = model_path.empty();  // the demo the app offers
  o.demo_model = appDemoModel();
  o.model_path = model_path;
  o.n_ctx = 16;  // the session's own context is unused: the tracer makes its own
  o.threads = threads;
  session_ = std::make_unique<EngineSession>(o);
  if (session_->model().config().n_expert == 0)
    throw std::runtime_error("the model has no experts to predict");
  source_ = sessionModelSource(o);
  sha256_ = model_sha256.empty() ? sessionModelSha256(o) : model_sha256;
}

PredictorTraining::~PredictorTraining() = default;

std::string PredictorTraining::modelName() const { return session_->model().config().model_name; }

TraceRates PredictorTraining::measureRates() {
  const std::vector<std::string> builtin = builtinPrompts();
  TraceRates r;
  const auto& tok = session_->model().tokenizer();
  double bytes = 0, tokens = 0;
  for (const auto& p : builtin) {
    bytes += double(p.size());
    tokens += double(tok.encode(p, false, false).size());
  }
  if (tokens > 0) r.bytes_per_token = bytes / tokens;
  const std::vector<std::string> sample(builtin.begin(),
                                        builtin.begin() + std::min<size_t>(3, builtin.size()));
  traceScratch(*session_, sha256_, sample, 0);  // warm-up: first touches of the weights, allocations
  const TraceRunResult prefill = traceScratch(*session_, sha256_, sample, 0);
  const TraceRunResult both = traceScratch(*session_, sha256_, sample, 4);
  r.prefill_seconds_per_token = prefill.tokens > 0 ? prefill.seconds / double(prefill.tokens) : 0;
  const int64_t decoded = both.tokens - prefill.tokens;
  // A greedy token costs at least what a prefill token costs (it is a batch of one).
  r.decode_seconds_per_token =
      decoded > 0 ? std::max(r.prefill_seconds_per_token, (both.seconds - prefill.seconds) / double(decoded))
                  : r.prefill_seconds_per_token;
  r.measured_tokens = int(prefill.tokens + both.tokens);
  r.measured_seconds = prefill.seconds + both.seconds;
  return r;
}

int PredictorTraining::tracedPrompts(const std::string& path) const {
  if (!std::filesystem::exists(path)) return 0;
  const TraceReader trace(path);
  if (trace.header().model_sha256 != sha256_)
    throw TraceFormatError(path + " is a trace of another model (" + trace.header().model_name + ")");
  return int(trace.prompts().size());
}

TraceRunResult PredictorTraining::trace(const std::vector<std::string>& prompts, const TraceOptions& options,
                                        const std::string& path,
                                        const std::function<void(const TraceProgress&)>& on_progress,
                                        const std::atomic<bool>* cancel) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  TraceWriter writer(path, traceHeaderFor(session_->model(), sha256_, source_));
  if (on_progress) {
    TraceProgress first;
    first.prompts_total = int(prompts.size());
    for (int p : writer.completedPrompts()) first.prompts_done += p < int(prompts.size()) ? 1 : 0;
    on_progress(first);
  }
  return collectTraces(session_->model(), session_->backend(), session_->offload().source(), prompts, writer,
                       options, on_progress, cancel);
}

TrainResult PredictorTraining::train(const std::string& trace_path, const TrainOptions& options,
                                     const std::function<void(const TrainProgress&)>& on_progress,
                                     const std::atomic<bool>* cancel) {
  const TraceReader trace(trace_path);
  if (trace.header().model_sha256 != sha256_)
    throw std::invalid_argument("the trace " + trace_path + " is of another model (" +
                                trace.header().model_name + ")");
  return trainPredictors(trace, options, on_progress, cancel);
}

EvalReport PredictorTraining::evaluate(const std::string& trace_path, const PredictorSet& set) {
  const TraceReader trace(trace_path);
  SkipGatePredictor skip(session_->model());
  return evaluatePredictorSet(trace, set, &skip);
}

}  // namespace moe
