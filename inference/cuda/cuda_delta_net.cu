// qwen35moe's gated delta-net layers on the device (inference/delta_net.h has the math
// and the host reference): the causal conv + SiLU with its carried state, the per-head
// L2 norm of q and k, the gated delta rule with each value head's state in device
// memory, the gated RMS norm; and the gated attention's sigmoid output gate.
// Products the CPU computes apart are kept apart (__fmul_rn, __fadd_rn) where the
// order of the CPU's sums can be kept too (conv, the norms' scaling, the gate); the
// norms sum squares in double as the CPU does; the delta rule's dot products are
// summed by lanes and a shuffle tree, so they differ from the CPU's by rounding.
#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda/cuda_launch.h"

namespace moe::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;

unsigned blocksFor(size_t n, size_t per_block) {
  const size_t blocks = (n + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < (size_t{1} << 20) ? (blocks > 0 ? blocks : 1) : (size_t{1} << 20));
}

__device__ __forceinline__ float siluOf(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float sigmoidOf(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplusOf(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

__device__ __forceinline__ double warpSum(double s) {
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(kFullMask, s, off);
  return s;
}

// One thread per channel, the tokens in order: tap K - 1 is the token, tap j the
// input K - 1 - j tokens back (a row of x, or before x's first row, state row t + j).
// Then the state's row j becomes the input at n_tokens - (K - 1) + j: rows in
// ascending order read only rows above them, so the thread updates its column in place.
__global__ void convSiluKernel(const float* x, const float* weight, float* state, float* out, int n_tokens,
                               int channels, int kernel) {
  const int c = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  const size_t C = static_cast<size_t>(channels);
  const int K = kernel;
  const float* w = weight + static_cast<size_t>(c) * K;
  for (int t = 0; t < n_tokens; ++t) {
    float acc = __fmul_rn(w[K - 1], x[static_cast<size_t>(t) * C + c]);
    for (int j = 0; j < K - 1; ++j) {
      const int p = t - (K - 1 - j);
      const float in = p >= 0 ? x[static_cast<size_t>(p) * C + c] : state[static_cast<size_t>(t + j) * C + c];
      acc = __fadd_rn(acc, __fmul_rn(w[j], in));
    }
    out[static_cast<size_t>(t) * C + c] = siluOf(acc);
  }
  for (int j = 0; j < K - 1; ++j) {
    const int p = n_tokens - (K - 1) + j;
    state[static_cast<size_t>(j) * C + c] =
        p >= 0 ? x[static_cast<size_t>(p) * C + c] : state[static_cast<size_t>(p + K - 1) * C + c];
  }
}

// One warp per (row, head): x / max(|x|, eps) * scale.
__global__ void l2NormHeadsKernel(float* x, int n_rows, size_t row_stride, int n_heads, int head_dim,
                                  float eps, float scale) {
  const int64_t item = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (item >= static_cast<int64_t>(n_rows) * n_heads) return;  // the whole warp
  const int lane = threadIdx.x % 32;
  float* v =
      x + static_cast<size_t>(item / n_heads) * row_stride + static_cast<size_t>(item % n_heads) * head_dim;
  double s = 0.0;
  for (int i = lane; i < head_dim; i += 32) s += static_cast<double>(v[i]) * v[i];
  s = warpSum(s);
  const float inv = scale / fmaxf(static_cast<float>(sqrt(s)), eps);
  for (int i = lane; i < head_dim; i += 32) v[i] = __fmul_rn(v[i], inv);
}

// One warp per row: y = x / sqrt(mean(x^2) + eps) * weight * silu(gate). Each lane
// writes only what it read, after the warp's sum: y may be x.
__global__ void gatedRmsNormKernel(const float* x, const float* weight, const float* gate, float* y,
                                   int n_rows, int dim, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= n_rows) return;  // the whole warp
  const int lane = threadIdx.x % 32;
  const float* xr = x + static_cast<size_t>(row) * dim;
  const float* gr = gate + static_cast<size_t>(row) * dim;
  float* yr = y + static_cast<size_t>(row) * dim;
  double s = 0.0;
  for (int i = lane; i < dim; i += 32) s += static_cast<double>(xr[i]) * xr[i];
  s = warpSum(s);
  const float inv = 1.0f / sqrtf(__fadd_rn(static_cast<float>(s / dim), eps));
  for (int i = lane; i < dim; i += 32)
    yr[i] = __fmul_rn(__fmul_rn(__fmul_rn(xr[i], inv), weight[i]), siluOf(gr[i]));
}

__global__ void sigmoidGateKernel(float* x, const float* gate, size_t n) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    x[i] = __fmul_rn(x[i], sigmoidOf(gate[i]));
}

// The gated delta rule. A value head's state rows evolve independently (row i sees
// only v[i] and the head's q, k, decay and rate), so a warp owns kRows rows of one
// head for the whole sequence and keeps them in registers: lane l holds elements
// l, l + 32, .. (kPer of them: head_k <= 32 * kPer) of each. Per token, two warp sums
// per row: S k after the decay, then S q after the update. Grid: (n_v_heads, row
// groups of kRows * kWarps); state read once before the tokens and written once after.
constexpr int kRows = 4;
constexpr int kWarps = 4;

// One token's inputs to a warp: its lanes' elements of q and k, the value of each of
// its rows, the decay and rate logits. Loaded a token ahead, so that the reads overlap
// the arithmetic of the token before.
template <int kPer>
struct DeltaToken {
  float q[kPer], k[kPer], v[kRows];
  float alpha, beta;
};

template <int kPer>
__device__ __forceinline__ void loadToken(const DeltaRuleLaunch& p, int t, int h, int row0, int lane,
                                          DeltaToken<kPer>& in) {
  const int HK = p.head_k, HV = p.head_v, key = p.n_k_heads * HK, kh = h % p.n_k_heads;
  const float* xt = p.x + static_cast<size_t>(t) * (2 * key + p.n_v_heads * HV);
#pragma unroll
  for (int m = 0; m < kPer; ++m) {
    const int j = lane + 32 * m;
    in.q[m] = j < HK ? xt[kh * HK + j] : 0.0f;
    in.k[m] = j < HK ? xt[key + kh * HK + j] : 0.0f;
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) in.v[r] = row0 + r < HV ? xt[2 * key + h * HV + row0 + r] : 0.0f;
  in.alpha = p.alpha[static_cast<size_t>(t) * p.n_v_heads + h];
  in.beta = p.beta[static_cast<size_t>(t) * p.n_v_heads + h];
}

template <int kPer>
__global__ void __launch_bounds__(kWarps * 32) deltaRuleKernel(DeltaRuleLaunch p) {
  const int h = blockIdx.x;
  const int lane = threadIdx.x % 32;
  const int row0 = (static_cast<int>(blockIdx.y) * kWarps + static_cast<int>(threadIdx.x) / 32) * kRows;
  if (row0 >= p.head_v) return;  // the whole warp
  const int HK = p.head_k, HV = p.head_v;
  const size_t V = static_cast<size_t>(p.n_v_heads) * HV;
  float* S = p.state + static_cast<size_t>(h) * HV * HK;

  float s[kRows][kPer];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int m = 0; m < kPer; ++m) {
      const int i = row0 + r, j = lane + 32 * m;
      s[r][m] = i < HV && j < HK ? S[static_cast<size_t>(i) * HK + j] : 0.0f;
    }
  const float dt_bias = p.dt_bias[h], a = p.a[h];
  DeltaToken<kPer> cur, next;
  loadToken(p, 0, h, row0, lane, cur);
  for (int t = 0; t < p.n_tokens; ++t) {
    if (t + 1 < p.n_tokens) loadToken(p, t + 1, h, row0, lane, next);
    const float decay = expf(softplusOf(cur.alpha + dt_bias) * a);
    const float b = sigmoidOf(cur.beta);
    float sk[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      sk[r] = 0.0f;
#pragma unroll
      for (int m = 0; m < kPer; ++m) {
        s[r][m] *= decay;
        sk[r] += s[r][m] * cur.k[m];
      }
    }
    for (int off = 16; off > 0; off /= 2)
#pragma unroll
      for (int r = 0; r < kRows; ++r) sk[r] += __shfl_xor_sync(kFullMask, sk[r], off);
    float oq[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float delta = (cur.v[r] - sk[r]) * b;
      oq[r] = 0.0f;
#pragma unroll
      for (int m = 0; m < kPer; ++m) {
        s[r][m] += cur.k[m] * delta;
        oq[r] += s[r][m] * cur.q[m];
      }
    }
    for (int off = 16; off > 0; off /= 2)
#pragma unroll
      for (int r = 0; r < kRows; ++r) oq[r] += __shfl_xor_sync(kFullMask, oq[r], off);
    if (lane == 0) {
      float* o = p.out + static_cast<size_t>(t) * V + static_cast<size_t>(h) * HV;
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        if (row0 + r < HV) o[row0 + r] = oq[r];
    }
    cur = next;
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int m = 0; m < kPer; ++m) {
      const int i = row0 + r, j = lane + 32 * m;
      if (i < HV && j < HK) S[static_cast<size_t>(i) * HK + j] = s[r][m];
    }
}

}  // namespace

void launchConvSilu(const float* x, const float* weight, float* state, float* out, int n_tokens, int channels,
                    int kernel, cudaStream_t stream) {
  if (n_tokens <= 0 || channels <= 0) return;
  launchKernel(convSiluKernel, blocksFor(static_cast<size_t>(channels), kThreads), kThreads, 0, stream, x,
               weight, state, out, n_tokens, channels, kernel);
  checkLaunch("delta-net conv kernel");
}

void launchL2NormHeads(float* x, int n_rows, size_t row_stride, int n_heads, int head_dim, float eps,
                       float scale, cudaStream_t stream) {
  if (n_rows <= 0 || n_heads <= 0 || head_dim <= 0) return;
  launchKernel(l2NormHeadsKernel, blocksFor(static_cast<size_t>(n_rows) * n_heads, kThreads / 32), kThreads,
               0, stream, x, n_rows, row_stride, n_heads, head_dim, eps, scale);
  checkLaunch("L2 norm kernel");
}

void launchDeltaRule(const DeltaRuleLaunch& p, cudaStream_t stream) {
  if (p.n_tokens <= 0) return;
  const dim3 grid(static_cast<unsigned>(p.n_v_heads),
                  static_cast<unsigned>((p.head_v + kRows * kWarps - 1) / (kRows * kWarps)));
  const int per = (p.head_k + 31) / 32;
  if (per <= 1)
    launchKernel(deltaRuleKernel<1>, grid, kWarps * 32, 0, stream, p);
  else if (per <= 2)
    launchKernel(deltaRuleKernel<2>, grid, kWarps * 32, 0, stream, p);
  else if (per <= 4)
    launchKernel(deltaRuleKernel<4>, grid, kWarps * 32, 0, stream, p);
  else
    launchKernel(deltaRuleKernel<8>, grid, kWarps * 32, 0, stream, p);
  checkLaunch("delta rule kernel");
}

void launchGatedRmsNorm(const float* x, const float* weight, const float* gate, float* y, int n_rows, int dim,
                        float eps, cudaStream_t stream) {
  if (n_rows <= 0 || dim <= 0) return;
  launchKernel(gatedRmsNormKernel, blocksFor(static_cast<size_t>(n_rows), kThreads / 32), kThreads, 0, stream,
               x, weight, gate, y, n_rows, dim, eps);
  checkLaunch("gated RMS norm kernel");
}

void launchSigmoidGate(float* x, const float* gate, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  launchKernel(sigmoidGateKernel, blocksFor(n, kThreads), kThreads, 0, stream, x, gate, n);
  checkLaunch("sigmoid gate kernel");
}

}  // namespace moe::cuda
