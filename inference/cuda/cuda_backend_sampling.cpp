// CudaBackend: the sampler's first steps and a logits row's best entries on the device
// (Backend::reduceLogits, cuda_sampling.cu): the penalised tokens go in, k candidates
// of 8 bytes come back instead of the row, waited for at once (readLogitCandidates) or
// through one of two pinned slots while the next step runs (queue/takeLogitCandidates).
// A sampled step a step ahead also draws its token there (cuda_draw.cu), with the
// host's uniform, and the drawn entry comes back after the candidates.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "inference/cuda/cuda_backend.h"
#include "inference/cuda/cuda_check.h"

namespace moe {

static_assert(sizeof(LogitCandidate) == sizeof(cuda::TopLogit) && offsetof(LogitCandidate, value) == 0 &&
                  offsetof(LogitCandidate, id) == offsetof(cuda::TopLogit, id),
              "the kernels write LogitCandidate's layout");

void CudaBackend::reservePenalty(size_t ids) {
  if (penalty_dev_.ptr && penalty_ids_ >= ids) return;
  const size_t room = std::max<size_t>(ids, 256);
  scratch(penalty_dev_, (cuda::kPenaltyHeader + room) * sizeof(int32_t), "penalised tokens");
  penalty_ids_ = room;
}

size_t CudaBackend::penaltyIds(const LogitsReduction& r) {
  return r.penalty != 1.0f ? r.penalised.size() : 0;
}

std::vector<int32_t> CudaBackend::penaltyValues(const LogitsReduction& r) const {
  const size_t count = penaltyIds(r);
  cuda::SamplingValues h{};
  h.count = static_cast<int32_t>(count);
  h.penalty = r.penalty;
  h.penalise_chosen = r.penalise_chosen && r.penalty != 1.0f ? 1 : 0;
  if (r.draw) {
    h.uniform = r.uniform;
    h.inv_temperature = 1.0 / double(r.temperature);  // the host sampler's expression
    h.top_p = r.top_p;
    h.min_p = r.min_p;
  }
  std::vector<int32_t> v(cuda::kPenaltyHeader + count);
  std::memcpy(v.data(), &h, sizeof h);
  std::copy_n(r.penalised.begin(), count, v.begin() + cuda::kPenaltyHeader);
  return v;
}

void CudaBackend::uploadPenalty(const LogitsReduction& r) {
  reservePenalty(penaltyIds(r));
  const std::vector<int32_t> values = penaltyValues(r);
  upload(penalty_dev_.ptr, values.data(), values.size() * sizeof(int32_t), "cuda backend: penalised tokens");
}

void CudaBackend::reduceLogits(const float* logits, int n_vocab, const LogitsReduction& r) {
  if (r.k < 1 || r.k > cuda::kMaxTopLogits || n_vocab <= 0)
    throw std::invalid_argument("cuda backend: reduceLogits: k = " + std::to_string(r.k) + " (1.." +
                                std::to_string(cuda::kMaxTopLogits) + ") of a row of " +
                                std::to_string(n_vocab));
  if (r.draw && (r.k < 2 || !(r.temperature > 0.0f) || !(r.uniform >= 0.0 && r.uniform < 1.0)))
    throw std::invalid_argument(
        "cuda backend: reduceLogits: a draw needs top_k + 1 >= 2 candidates, a "
        "temperature > 0 and a uniform in [0, 1)");
  void* keys = scratch(top_keys_, cuda::topLogitsScratchBytes(n_vocab, r.k), "top logits keys");
  // The candidates, then the drawn entry (where the step draws).
  auto* out =
      static_cast<cuda::TopLogit*>(scratch(top_out_, size_t(r.k + 1) * sizeof(cuda::TopLogit), "top logits"));
  auto* chosen = static_cast<int32_t*>(scratch(step_dev_, 2 * sizeof(int32_t), "step values"));
  if (capturing_) {
    // A recorded step's penalised tokens and draw were uploaded before it (uploadStepValues).
    if (r.k != step_reduce_k_ || r.draw != step_draws_) {
      graphs_failed_ = true;
      throw StepCaptureFailed("a recorded step reduces its logits as its values say");
    }
  } else {
    uploadPenalty(r);
  }
  const auto* values = static_cast<const cuda::SamplingValues*>(penalty_dev_.ptr);
  cuda::launchTopLogits(logits, n_vocab, values, r.k, keys, out, chosen, stream_);
  if (r.draw) cuda::launchDrawCandidate(out, r.k, values, chosen, out + r.k, stream_);
  top_k_ = r.k;
  top_draws_ = r.draw;
}

void CudaBackend::readLogitCandidates(std::span<LogitCandidate> out) {
  if (out.size() > size_t(top_k_))
    throw std::invalid_argument("cuda backend: readLogitCandidates: " + std::to_string(out.size()) +
                                " entries asked of a reduction to " + std::to_string(top_k_));
  readBack(out.data(), top_out_.ptr, out.size() * sizeof(LogitCandidate));
}

CudaBackend::CandidateSlot& CudaBackend::candidateSlot(int slot) {
  if (slot < 0 || slot >= kCandidateSlots)
    throw std::invalid_argument("cuda backend: candidate slot " + std::to_string(slot) + " (0.." +
                                std::to_string(kCandidateSlots - 1) + ")");
  return candidate_slots_[slot];
}

void CudaBackend::reserveCandidateSlots() {
  for (CandidateSlot& s : candidate_slots_)
    if (!s.host)
      s.host = static_cast<LogitCandidate*>(
          cudaHostAllocOrThrow((cuda::kMaxTopLogits + 1) * sizeof(LogitCandidate), "pinned candidates"));
}

// The copy lands behind everything queued so far; the host waits for it (its event),
// not for the steps queued after it.
void CudaBackend::queueLogitCandidates(int slot) {
  refuseWhileCapturing("cuda backend: candidates to the host");
  CandidateSlot& s = candidateSlot(slot);
  reserveCandidateSlots();
  if (top_k_ < 1) throw std::logic_error("cuda backend: queueLogitCandidates before any reduceLogits");
  const size_t entries = size_t(top_k_) + (top_draws_ ? 1 : 0);  // and the drawn entry
  checkCuda(cudaMemcpyAsync(s.host, top_out_.ptr, entries * sizeof(LogitCandidate), cudaMemcpyDeviceToHost,
                            stream_),
            "cuda backend: candidates to the host");
  checkCuda(cudaEventRecord(s.done, stream_), "cuda backend: candidates: cudaEventRecord");
  s.k = top_k_;
  s.drew = top_draws_;
}

int32_t CudaBackend::takeLogitCandidates(int slot, std::span<LogitCandidate> out) {
  refuseWhileCapturing("cuda backend: candidates from the host's slot");
  CandidateSlot& s = candidateSlot(slot);
  if (out.size() > size_t(s.k))
    throw std::invalid_argument("cuda backend: takeLogitCandidates: " + std::to_string(out.size()) +
                                " entries asked of a slot holding " + std::to_string(s.k));
  checkCuda(cudaEventSynchronize(s.done), "cuda backend: candidates: wait");
  std::memcpy(out.data(), s.host, out.size() * sizeof(LogitCandidate));
  if (s.drew) return s.host[s.k].id;
  return s.k == 1 ? s.host[0].id : -1;
}

}  // namespace moe
