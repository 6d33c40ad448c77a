// eval-predictor: the learned predictor against the baselines on the trace's
// held-out test prompts, per layer and overall (docs/predictor.md). With --demo
// alone it runs the whole pipeline on the demo model (trace, train, evaluate).
#include <cstdio>
#include <filesystem>
#include <optional>

#include <unistd.h>

#include "app/cli/commands.h"
#include "app/cli/model_options.h"
#include "app/cli/offload_options.h"
#include "app/cli/predictor_cli.h"
#include "offload/offload_engine.h"
#include "offload/skip_gate_predictor.h"
#include "offload/trainer/engine_eval.h"
#include "offload/trainer/eval_predictor.h"

namespace moe::cli {
namespace {

// The model the trace was taken from, for skip-gate: --model / --demo, else the
// path in the trace header when it still exists; none when neither is there.
std::optional<SessionOptions> modelFor(const Args& args, const TraceHeader& h) {
  SessionOptions o;
  o.n_ctx = 16;
  o.threads = args.intOr("--threads", 0);
  if (args.flag("--demo") || args.flag("--demo-random")) {
    o.demo = true;
    o.demo_model = args.flag("--demo") ? DemoModel::kTrained : DemoModel::kRandom;
  } else if (auto m = args.value("--model")) {
    o.model_path = *m;
  } else if (h.model_source == "demo" || h.model_source == "demo-random") {
    o.demo = true;
    o.demo_model = h.model_source == "demo" ? DemoModel::kTrained : DemoModel::kRandom;
  } else if (std::filesystem::exists(h.model_source)) {
    o.model_path = h.model_source;
  } else {
    return std::nullopt;
  }
  return o;
}

// With --engine, the test prompts also run through the offload engine (reactive
// LRU, proactive with skip-gate, proactive with the learned set) at one cache size.
void print(const Args& args, const EvalReport& r, EngineSession* session, const TraceReader& trace,
           const PredictorSet& set) {
  const bool json = args.flag("--json");
  std::vector<EngineEvalRow> engine;
  if (args.flag("--engine")) {
    if (!session) throw std::runtime_error("--engine needs the model (--model FILE or --demo)");
    EngineEvalOptions o;
    o.cache_slots = cacheSlotsFor(BudgetSetting::cacheShare(args.doubleOr("--cache-share", 0.25)),
                                  session->model(), OffloadPolicy::kProactive);
    o.link_bytes_per_second = args.doubleOr("--link-gbps", 0) * 1e9;
    engine = compareInEngine(session->model(), session->backend(), trace, set, o);
  }
  if (json) {
    std::string out = evalReportJson(r);
    if (!engine.empty())
      out = out.substr(0, out.rfind('}')) + ", \"engine\": " + engineEvalJson(engine) + "}\n";
    std::fputs(out.c_str(), stdout);
  } else {
    std::fputs(evalReportText(r).c_str(), stdout);
    if (!engine.empty()) std::fputs(engineEvalText(engine).c_str(), stdout);
  }
}

int demoPipeline(const Args& args) {
  const auto dir = std::filesystem::temp_directory_path() / ("moechat-eval-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  struct Cleanup {
    std::filesystem::path p;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(p, ec);
    }
  } cleanup{dir};
  SessionOptions opts;
  opts.demo = true;
  opts.demo_model = args.flag("--demo-random") ? DemoModel::kRandom : DemoModel::kTrained;
  opts.threads = args.intOr("--threads", 0);
  EngineSession session(opts);
  if (session.model().isSynthetic()) std::fprintf(stderr, "%s\n", kDemoNotice);
  const std::string trace_path = (dir / "demo.moetrace").string();
  TraceOptions to;
  to.max_new_tokens = args.intOr("--max-tokens", 8);
  traceToFile(session, opts, builtinPrompts(), trace_path, to);
  const TraceReader trace(trace_path);
  TrainOptions o;
  o.distance = args.intOr("--distance", 2);
  o.hidden = args.intOr("--hidden", 64);
  o.seed = args.uint64Or("--seed", 1);
  o.threads = opts.threads;
  o.trained_on = "built-in prompts";
  const PredictorSet set = trainFromTrace(trace, o);
  SkipGatePredictor skip(session.model());
  print(args, evaluatePredictorSet(trace, set, &skip), &session, trace, set);
  return 0;
}

}  // namespace

int runEvalPredictor(const std::vector<std::string>& argv) {
  const Args args(argv,
                  {"--model", "--threads", "--max-tokens", "--distance", "--hidden", "--seed",
                   "--cache-share", "--link-gbps"},
                  {"--json", "--demo", "--demo-random", "--engine"});
  if (args.flag("--demo") && args.flag("--demo-random"))
    throw UsageError("--demo and --demo-random are exclusive");
  if (args.positionals().empty() && (args.flag("--demo") || args.flag("--demo-random")))
    return demoPipeline(args);
  if (args.positionals().size() != 2)
    throw UsageError("give TRACE PREDICTOR (from `trace` and `train`), or --demo for the whole pipeline");
  const TraceReader trace(args.positionals()[0]);
  const PredictorSet set = PredictorSet::load(args.positionals()[1]);
  std::unique_ptr<EngineSession> session;
  std::unique_ptr<SkipGatePredictor> skip;
  if (auto opts = modelFor(args, trace.header())) {
    session = std::make_unique<EngineSession>(*opts);
    const auto& c = session->model().config();
    if (c.n_embd != trace.header().n_embd || c.n_expert != trace.header().n_expert)
      throw std::runtime_error("the model does not match the trace (another n_embd or expert count)");
    skip = std::make_unique<SkipGatePredictor>(session->model());
  } else {
    std::fprintf(stderr,
                 "the traced model %s is not at hand: skip-gate is not measured (pass --model FILE)\n",
                 trace.header().model_source.c_str());
  }
  print(args, evaluatePredictorSet(trace, set, skip.get()), session.get(), trace, set);
  return 0;
}

}  // namespace moe::cli
