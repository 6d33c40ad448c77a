#include "offload/prediction_thread.h"

#include <exception>

namespace moe {

PredictionThread::PredictionThread(ExpertPredictor& predictor, Push push)
    : predictor_(predictor), push_(std::move(push)), thread_([this] { run(); }) {}

PredictionThread::~PredictionThread() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool PredictionThread::submit(int layer, int target, std::span<const float> hidden, int n_tokens, int budget,
                              uint64_t ticket) {
  bool replaced = false;
  {
    std::lock_guard lock(mutex_);
    replaced = has_next_;
    next_.layer = layer;
    next_.target = target;
    next_.n_tokens = n_tokens;
    next_.budget = budget;
    next_.ticket = ticket;
    next_.hidden.assign(hidden.begin(), hidden.end());  // reuses the buffer's capacity
    has_next_ = true;
  }
  cv_.notify_all();
  return replaced;
}

void PredictionThread::run() {
  PredictionRequest req;
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || has_next_; });
    if (stop_) return;
    std::swap(req, next_);
    has_next_ = false;
    busy_ = true;
    lock.unlock();
    try {  // a prediction is an optimisation: a failing one must not take the engine down
      std::vector<ExpertGuess> guesses =
          predictor_.predictScored(req.layer, req.target, req.hidden, req.n_tokens, req.budget);
      if (!guesses.empty()) push_(req, std::move(guesses));
    } catch (const std::exception&) {
    }
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void PredictionThread::waitIdle() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return stop_ || (!has_next_ && !busy_); });
}

}  // namespace moe
