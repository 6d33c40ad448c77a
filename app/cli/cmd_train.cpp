// train: one small MLP per MoE layer from a trace, predicting the experts of
// layer L + distance (docs/predictor.md).
#include <cstdio>

#include "app/cli/commands.h"
#include "app/cli/predictor_cli.h"

namespace moe::cli {

PredictorSet trainFromTrace(const TraceReader& trace, const TrainOptions& options) {
  const auto result = trainPredictors(trace, options, [](const TrainProgress& p) {
    if (p.layer_done)
      std::fprintf(stderr, "layer %d done (%d/%d): validation Accuracy %.3f, loss %.4f\n", p.layer,
                   p.layers_done, p.layers_total, p.val_accuracy, p.val_loss);
  });
  if (result.cancelled) throw std::runtime_error("training was cancelled");
  return result.set;
}

int runTrain(const std::vector<std::string>& argv) {
  const Args args(argv,
                  {"-o", "--distance", "--hidden", "--epochs", "--seed", "--threads", "--patience", "--lr"},
                  {}, {{"--output", "-o"}});
  if (args.positionals().size() != 1) throw UsageError("give one trace file (from `moechat-cli trace`)");
  const auto out = args.value("-o");
  if (!out) throw UsageError("give the predictor file to write with -o");
  TrainOptions o;
  o.distance = args.intOr("--distance", 2);
  o.hidden = args.intOr("--hidden", 0);
  o.max_epochs = args.intOr("--epochs", 30);
  o.patience = args.intOr("--patience", 4);
  o.seed = args.uint64Or("--seed", 1);
  o.threads = args.intOr("--threads", 0);
  o.learning_rate = float(args.doubleOr("--lr", 1e-3));
  if (o.distance < 1 || o.distance > 3) throw UsageError("--distance must be 1, 2 or 3");
  if (o.hidden < 0 || o.max_epochs < 1 || o.patience < 1 || !(o.learning_rate > 0))
    throw UsageError("--hidden must be >= 0 (0: automatic), --epochs and --patience >= 1, --lr > 0");
  const TraceReader trace(args.positionals().front());
  o.trained_on =
      "trace " + args.positionals().front() + " (" + std::to_string(trace.prompts().size()) + " prompts)";
  std::fprintf(stderr, "training on %s: %zu prompts, %d tokens, distance %d\n",
               trace.header().model_name.c_str(), trace.prompts().size(), trace.totalTokens(), o.distance);
  const PredictorSet set = trainFromTrace(trace, o);
  set.save(*out);
  std::printf("%s: %zu layer predictors (hidden %d, %lld parameters each), %lld training tokens\n",
              out->c_str(), set.layers.size(), set.layers.front().n_hidden,
              (long long)set.layers.front().parameterCount(), (long long)set.token_count);
  return 0;
}

}  // namespace moe::cli
