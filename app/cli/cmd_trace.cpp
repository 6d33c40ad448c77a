// trace: runs a model over prompts and records, per token and MoE layer, the
// layer's input and the gate's choice (docs/predictor.md).
#include <algorithm>
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/model_options.h"
#include "app/cli/predictor_cli.h"
#include "app/core/predictor_training.h"

namespace moe::cli {

std::string modelSha256(const SessionOptions& opts) { return sessionModelSha256(opts); }

TraceRunResult traceToFile(EngineSession& session, const SessionOptions& opts,
                           const std::vector<std::string>& prompts, const std::string& out,
                           const TraceOptions& options) {
  if (!opts.demo)
    std::fprintf(stderr, "hashing %s (SHA-256, the model's identity)...\n", opts.model_path.c_str());
  const std::string sha = modelSha256(opts);
  TraceWriter writer(out, traceHeaderFor(session.model(), sha, sessionModelSource(opts)));
  if (!writer.completedPrompts().empty())
    std::fprintf(stderr, "resuming %s: %zu of %zu prompts already traced\n", out.c_str(),
                 writer.completedPrompts().size(), prompts.size());
  auto result = collectTraces(
      session.model(), session.backend(), session.offload().source(), prompts, writer, options,
      [last = -1.0](const TraceProgress& p) mutable {
        // A line about twice a second (and the last one), not one per prompt.
        if (p.prompts_done < p.prompts_total && p.seconds - last < 0.5) return;
        last = p.seconds;
        std::fprintf(stderr, "\rtraced %d/%d prompts, %lld tokens, %.1f s, ETA %.0f s   ", p.prompts_done,
                     p.prompts_total, (long long)p.tokens_done, p.seconds, p.eta_seconds);
      });
  std::fprintf(stderr, "\n%s: %d prompts traced (%d skipped as done), %lld tokens in %.1f s, %.1f MB\n",
               out.c_str(), result.prompts_traced, result.prompts_skipped, (long long)result.tokens,
               result.seconds, writer.bytesWritten() / 1e6);
  return result;
}

int runTrace(const std::vector<std::string>& argv) {
  auto vo = modelValueOptions();
  vo.insert({"--prompts", "-o", "--max-tokens", "--max-prompt-tokens", "--limit"});
  const Args args(argv, vo, modelFlags(), {{"--output", "-o"}});
  SessionOptions opts = sessionOptions(args);
  TraceOptions options;
  options.max_new_tokens = args.intOr("--max-tokens", 0);
  options.max_prompt_tokens = args.intOr("--max-prompt-tokens", 512);
  if (options.max_new_tokens < 0 || options.max_prompt_tokens < 1)
    throw UsageError("--max-tokens must be >= 0 and --max-prompt-tokens >= 1");
  opts.n_ctx = std::max(opts.n_ctx, options.max_prompt_tokens + options.max_new_tokens + 1);
  std::vector<std::string> prompts;
  if (auto file = args.value("--prompts"))
    prompts = promptsFromFile(*file);
  else
    prompts = builtinPrompts();
  const int limit = args.intOr("--limit", 0);
  if (limit < 0) throw UsageError("--limit must be >= 0");
  if (limit > 0 && limit < int(prompts.size())) prompts.resize(limit);
  EngineSession session(opts);
  announceModel(session.model());
  if (session.model().config().n_expert == 0) throw std::runtime_error("the model has no experts to trace");
  const std::string out = args.valueOr("-o", "trace.moetrace");
  const auto result = traceToFile(session, opts, prompts, out, options);
  return result.cancelled ? 1 : 0;
}

}  // namespace moe::cli
