// The predictor off the compute thread ("fed on a CPU thread
// with each layer's input hidden state"). On a GPU the host thread that queues the
// kernels also runs the MoE block's bookkeeping; a skip-gate or learned prediction
// there (tens to hundreds of microseconds per layer on one core) would sit on the
// critical path. submit() copies the layer's FFN input and returns at once; this
// thread predicts and hands the experts to `push`.
//
// It never falls behind by more than one request: one still waiting when a newer
// one arrives is replaced (its target layer comes before the newer one's, so it
// would be the first to arrive too late). `push` decides whether a result still
// counts (CachedExpertSource drops one whose target gate has already run).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "offload/expert_predictor.h"

namespace moe {

struct PredictionRequest {
  int layer = -1, target = -1;
  int n_tokens = 0, budget = 0;
  uint64_t ticket = 0;  // the submitter's stamp, handed back with the result
  std::vector<float> hidden;
};

class PredictionThread {
 public:
  using Push = std::function<void(const PredictionRequest&, std::vector<ExpertGuess> guesses)>;
  PredictionThread(ExpertPredictor& predictor, Push push);
  ~PredictionThread();
  PredictionThread(const PredictionThread&) = delete;
  PredictionThread& operator=(const PredictionThread&) = delete;

  // Returns true when it replaced a request still waiting (that one is dropped unpredicted).
  bool submit(int layer, int target, std::span<const float> hidden, int n_tokens, int budget,
              uint64_t ticket);
  // Blocks until no request is waiting or being predicted.
  void waitIdle();

 private:
  void run();

  ExpertPredictor& predictor_;
  Push push_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  PredictionRequest next_;  // the waiting request (valid when has_next_)
  bool has_next_ = false, busy_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace moe
