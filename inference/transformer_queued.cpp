// Transformer: decode steps queued with their candidates' copy to the host, read once
// the next step is queued (the Generator's greedy or sampled decode): the next step
// embeds the token the device chose or drew, so the device runs on while the host
// reads and checks it.
#include <stdexcept>

#include "inference/transformer.h"

namespace moe {

bool Transformer::decodesAhead() const {
  return backend_.embedsChosenToken() && !cfg_.hasRecurrentLayers() && !graphs_off_ && stepStaysOnTheDevice();
}

void Transformer::queueStep(int32_t token, const LogitsReduction& reduce) {
  if (!reducesTo(reduce))
    throw std::invalid_argument("Transformer::queueStep: a reduction the backend refuses");
  if (queued_.size() >= kMaxQueued)
    throw std::logic_error("Transformer::queueStep: two steps queued already");
  std::vector<float> unused;
  forwardTokens(std::span(&token, 1), Output{unused, &reduce, nullptr}, false);
}

bool Transformer::queueChosenStep(const LogitsReduction& reduce) {
  if (!chose_on_device_ || !(reduce.k == 1 || reduce.draw) || !reducesTo(reduce) || n_past_ >= n_ctx_ ||
      queued_.size() >= kMaxQueued || !decodesAhead())
    return false;
  const int32_t token = kChosenOnDevice;
  positions_.assign(1, n_past_);
  mapped_layers_.clear();
  try {
    if (!runAsGraph({token, n_past_, id_, &reduce, true}, std::span(&token, 1))) return false;
  } catch (const Cancelled&) {  // while recording: nothing ran, and the caller sees the cancel
    return false;
  }
  if (on_batch_) on_batch_({n_past_, std::span(&token, 1)});
  ++n_past_;
  queueCandidates(reduce.k);
  return true;
}

// The slot the oldest queued step does not hold.
void Transformer::queueCandidates(int k) {
  if (queued_.size() >= kMaxQueued)
    throw std::logic_error("Transformer: two steps' candidates queued already");
  const int slot = queued_.empty() ? 0 : 1 - queued_.front().slot;
  backend_.queueLogitCandidates(slot);
  queued_.push_back({n_past_ - 1, slot, k});
}

int32_t Transformer::takeCandidates(std::vector<LogitCandidate>& best) {
  if (queued_.empty()) throw std::logic_error("Transformer::takeCandidates: no step queued");
  const QueuedStep q = queued_.front();
  queued_.pop_front();
  best.resize(size_t(q.k));
  return backend_.takeLogitCandidates(q.slot, best);
}

}  // namespace moe
