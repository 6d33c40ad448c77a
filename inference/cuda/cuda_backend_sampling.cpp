// CudaBackend: the sampler's first steps and a logits row's best entries on the device
// (Backend::reduceLogits, cuda_sampling.cu): the penalised tokens go in, k candidates
// of 8 bytes come back instead of the row.
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
  if (penalty_host_ && penalty_ids_ >= ids) return;
  refuseWhileCapturing("cuda backend: room for the penalised tokens");
  const size_t room = std::max<size_t>(ids, 256);
  synchronize();  // a queued step may still copy the old pinned buffer
  if (penalty_host_) cudaFreeHost(penalty_host_);
  penalty_host_ = nullptr;
  penalty_ids_ = 0;
  penalty_host_ =
      static_cast<int32_t*>(cudaHostAllocOrThrow((2 + room) * sizeof(int32_t), "pinned penalised tokens"));
  scratch(penalty_dev_, (2 + room) * sizeof(int32_t), "penalised tokens");
  penalty_ids_ = room;
  ++buffers_generation_;  // a recorded step copies from the old pinned buffer
}

std::vector<int32_t> CudaBackend::penaltyValues(const LogitsReduction& r) const {
  const size_t count = r.penalty != 1.0f ? r.penalised.size() : 0;
  std::vector<int32_t> v(2 + count);
  v[0] = static_cast<int32_t>(count);
  std::memcpy(&v[1], &r.penalty, sizeof(float));
  std::copy_n(r.penalised.begin(), count, v.begin() + 2);
  return v;
}

int CudaBackend::recordedPenaltyIds(const LogitsReduction& r) const {
  const size_t count = r.penalty != 1.0f ? r.penalised.size() : 0;
  return static_cast<int>(std::min(penalty_ids_, std::max<size_t>(64, (count + 63) / 64 * 64)));
}

void CudaBackend::reduceLogits(const float* logits, int n_vocab, const LogitsReduction& r) {
  if (r.k < 1 || r.k > cuda::kMaxTopLogits || n_vocab <= 0)
    throw std::invalid_argument("cuda backend: reduceLogits: k = " + std::to_string(r.k) + " (1.." +
                                std::to_string(cuda::kMaxTopLogits) + ") of a row of " +
                                std::to_string(n_vocab));
  void* keys = scratch(top_keys_, cuda::topLogitsScratchBytes(n_vocab, r.k), "top logits keys");
  void* out = scratch(top_out_, size_t(r.k) * sizeof(cuda::TopLogit), "top logits");
  const std::vector<int32_t> values = penaltyValues(r);
  if (capturing_) {
    // The recorded step's copy, from the pinned buffer the host fills before each launch.
    if (r.k != step_reduce_k_ || values.size() - 2 > size_t(step_reduce_ids_)) {
      graphs_failed_ = true;
      throw StepCaptureFailed("a recorded step reduces its logits as its values say");
    }
    checkCuda(
        cudaMemcpyAsync(penalty_dev_.ptr, penalty_host_, (2 + size_t(step_reduce_ids_)) * sizeof(int32_t),
                        cudaMemcpyHostToDevice, stream_),
        "cuda backend: penalised tokens");
  } else {
    reservePenalty(values.size() - 2);
    upload(penalty_dev_.ptr, values.data(), values.size() * sizeof(int32_t),
           "cuda backend: penalised tokens");
  }
  cuda::launchTopLogits(logits, n_vocab, static_cast<const int32_t*>(penalty_dev_.ptr), r.k, keys,
                        static_cast<cuda::TopLogit*>(out), stream_);
  top_k_ = r.k;
}

void CudaBackend::readLogitCandidates(std::span<LogitCandidate> out) {
  if (out.size() > size_t(top_k_))
    throw std::invalid_argument("cuda backend: readLogitCandidates: " + std::to_string(out.size()) +
                                " entries asked of a reduction to " + std::to_string(top_k_));
  readBack(out.data(), top_out_.ptr, out.size() * sizeof(LogitCandidate));
}

}  // namespace moe
