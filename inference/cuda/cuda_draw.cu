// The sampler's draw on the device, so that a sampled decode can queue the next step
// before the host has read the token: over a row's best top_k + 1 entries (as
// launchTopLogits left them, best first) exactly what the host's
// Sampler::sample(candidates) does (inference/sampler.cpp, draw), operation for
// operation in double, with the uniform the host drew for this token:
//   candidates: the entries with a token (a prefix of them); where one was left out
//     (all top_k + 1 have one) the best top_k, else every one;
//   weights exp((x - x_max) / T), relative to the best logit; z, their sum, in
//     best-first order where one was left out, else in token-id order (the host's
//     order of its candidates in each case);
//   top-p: the shortest best-first prefix whose running sum reaches top_p * z;
//   min-p: of that prefix, the entries up to the first whose weight is below min_p
//     times the best's;
//   the draw: the kept set in token-id order, the first whose running sum exceeds the
//     uniform times their sum (the last where rounding puts it at the very top).
// Every sum runs in one thread in the host's order, through __dadd_rn / __dmul_rn so
// nothing is contracted into an FMA; every thread computes weights and id ranks. The
// device's exp may differ from glibc's in the last ulp (docs/CUDA.md): another token
// only where the uniform lands within ~1e-16 of a boundary. On the stand-in, whose exp
// is glibc's, the token is the host's bit for bit.
#include <cmath>
#include <cstdint>

#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda/cuda_launch.h"

namespace moe::cuda {
namespace {

constexpr int kDrawThreads = 128;

__device__ bool hasToken(const TopLogit& e) { return e.id >= 0 && e.value != -INFINITY; }

// order[0, n): the indices i < n ordered by ids[i], ascending (the ids are distinct).
__device__ void idOrder(const int32_t* ids, int n, int* order) {
  for (int i = threadIdx.x; i < n; i += kDrawThreads) {
    int rank = 0;
    for (int j = 0; j < n; ++j) rank += ids[j] < ids[i] ? 1 : 0;
    order[rank] = i;
  }
  __syncthreads();
}

__global__ void drawCandidateKernel(const TopLogit* best, int k, const SamplingValues* values,
                                    int32_t* chosen, TopLogit* drawn) {
  __shared__ double weight[kMaxTopLogits];  // of best[i]
  __shared__ int32_t ids[kMaxTopLogits];    // of best[i]
  __shared__ int order[kMaxTopLogits];      // indices into best, by token id
  __shared__ int with_token, kept;
  if (threadIdx.x == 0) {
    int m = 0;
    while (m < k && hasToken(best[m])) ++m;
    with_token = m;
  }
  __syncthreads();
  const int m = with_token;
  if (m == 0) {
    // A row without a token (the host's sampler refuses it): a step already queued on
    // it embeds a valid token, and its result is dropped.
    if (threadIdx.x == 0) {
      *chosen = 0;
      *drawn = {-INFINITY, -1};
    }
    return;
  }
  const int top_k = k - 1;
  const bool left_out = m > top_k;
  const int n = left_out ? top_k : m;
  const double x_max = static_cast<double>(best[0].value);
  const double inv_t = values->inv_temperature;
  for (int i = threadIdx.x; i < n; i += kDrawThreads) {
    ids[i] = best[i].id;
    weight[i] = exp(__dmul_rn(__dsub_rn(static_cast<double>(best[i].value), x_max), inv_t));
  }
  __syncthreads();
  if (!left_out) idOrder(ids, n, order);  // every thread: left_out is the block's
  if (threadIdx.x == 0) {
    double z = 0.0;
    for (int i = 0; i < n; ++i) z = __dadd_rn(z, weight[left_out ? i : order[i]]);
    int keep = n;
    if (values->top_p < 1.0f) {
      const double target = __dmul_rn(static_cast<double>(values->top_p), z);
      double cum = 0.0;
      int i = 0;
      for (; i < n; ++i) {
        cum = __dadd_rn(cum, weight[i]);
        if (cum >= target) break;
      }
      keep = min(n, i + 1);  // at least one token
    }
    if (values->min_p > 0.0f) {
      const double threshold = __dmul_rn(static_cast<double>(values->min_p), weight[0]);
      int i = 1;
      while (i < keep && !(weight[i] < threshold)) ++i;
      keep = i;
    }
    kept = keep;
  }
  __syncthreads();
  const int keep = kept;
  idOrder(ids, keep, order);
  if (threadIdx.x == 0) {
    double total = 0.0;
    for (int i = 0; i < keep; ++i) total = __dadd_rn(total, weight[order[i]]);
    const double r = __dmul_rn(values->uniform, total);
    double cum = 0.0;
    int pick = order[keep - 1];
    for (int i = 0; i < keep; ++i) {
      cum = __dadd_rn(cum, weight[order[i]]);
      if (r < cum) {
        pick = order[i];
        break;
      }
    }
    *chosen = best[pick].id;
    *drawn = best[pick];
  }
}

}  // namespace

void launchDrawCandidate(const TopLogit* best, int k, const SamplingValues* values, int32_t* chosen,
                         TopLogit* drawn, cudaStream_t stream) {
  if (k < 2 || k > kMaxTopLogits) return;  // top_k >= 1
  launchKernel(drawCandidateKernel, 1, kDrawThreads, 0, stream, best, k, values, chosen, drawn);
  checkLaunch("draw kernel");
}

}  // namespace moe::cuda
