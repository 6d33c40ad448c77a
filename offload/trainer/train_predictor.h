// Trains one MlpPredictor per MoE layer L whose layer L + distance has a router,
// from a trace: BCE on the multi-hot experts L + distance chose, Adam, mini-
// batches, early stopping on held-out prompts. Deterministic for a seed (each
// layer has its own generator; layers run in parallel on std::threads).
#pragma once

#include <atomic>
#include <functional>
#include <vector>

#include "offload/mlp_predictor.h"
#include "offload/trainer/trace_file.h"

namespace moe {

struct TrainOptions {
  int distance = 2;  // 1..3
  int hidden = 0;    // 0: about 1M parameters per layer, between 32 and 256
  int max_epochs = 30;
  int patience = 4;  // epochs without a better validation loss before stopping
  int batch = 32;
  float learning_rate = 1e-3f;
  uint64_t seed = 1;
  int threads = 0;  // 0: hardware threads
  double val_share = 0.1, test_share = 0.1;
  std::string trained_on;  // recorded in the set
};

// The prompt split: validation (early stopping) and test (evaluation) are whole
// prompts, so both are measured on text the predictor never saw.
struct PromptSplit {
  std::vector<int> train, val, test;
};
// Deterministic for the seed; needs at least 3 prompts (throws std::invalid_argument).
PromptSplit splitPrompts(std::vector<int> prompts, uint64_t seed, double val_share, double test_share);

struct TrainProgress {
  int layer = 0, epoch = 0, max_epochs = 0;
  double train_loss = 0, val_loss = 0, val_accuracy = 0;
  bool layer_done = false;
  int layers_done = 0, layers_total = 0;
};

int defaultHiddenWidth(int n_in, int n_out);

// Throws std::invalid_argument for a bad distance or a trace without enough
// prompts or layers; returns a set with cancelled layers left out when *cancel
// turns true (check `cancelled`).
struct TrainResult {
  PredictorSet set;
  bool cancelled = false;
};
TrainResult trainPredictors(const TraceReader& trace, const TrainOptions& options,
                            const std::function<void(const TrainProgress&)>& on_progress = {},
                            const std::atomic<bool>* cancel = nullptr);

}  // namespace moe
