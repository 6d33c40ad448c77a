// The quantised matmul of few tokens (decode, and every matmul of a prefill on
// quantised weights): the activations quantised once to 8-bit rows
// (quantizeActsKernel), then one warp per weight row takes 32-element units
// lane by lane, dots each with up to kTokenTile activation rows by dp4a
// (cuda_quant.cuh), and sums over the warp. The element type is a template
// parameter, so each kernel decodes one layout with no per-element switch. Matrices
// that read the same activations (q, k, v) share one launch (MatvecGroup): on a
// GPU a decode step's small matmuls cost their launches more than their bytes.
//
// Bytes: every weight byte is read once per kTokenTile tokens (once per decode
// step); the activation rows (cols + 8 bytes per 32 elements each) are shared by
// every row of the block and stay in L1/L2.
#include <cstdint>
#include <stdexcept>

#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda/cuda_launch.h"
#include "inference/cuda/cuda_quant.cuh"

namespace moe::cuda {
namespace {

constexpr int kWarps = 4;  // rows per block
constexpr int kTokenTile = 8;

// One warp per group of 32 elements (Q8_0 scales) or 256 (Q8_K scales) of a row.
__global__ void quantizeActsKernel(const float* x, int64_t groups, bool q8k, int8_t* q, float* d, int* s) {
  const int lane = threadIdx.x % 32;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (g >= groups) return;
  if (!q8k) {  // g = row * units + unit; lane = element
    const float v = x[g * 32 + lane];
    float amax = fabsf(v);
    for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const float dd = amax / 127.0f;
    const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
    const int qv = __float2int_rn(v * id);
    q[g * 32 + lane] = static_cast<int8_t>(qv);
    int sum = qv;
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0) {
      d[g] = __half2float(__float2half_rn(dd));
      s[g] = sum;
    }
    return;
  }
  // Q8_K: g = row * (units / 8) + block; lane takes elements 8 lane .. 8 lane + 7.
  const float* xb = x + g * 256 + 8 * lane;
  float v[8];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = xb[i], amax = fmaxf(amax, fabsf(v[i]));
  for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  int first = 256;  // the first element of largest magnitude gives the sign
#pragma unroll
  for (int i = 7; i >= 0; --i)
    if (fabsf(v[i]) == amax) first = 8 * lane + i;
  for (int off = 16; off > 0; off /= 2) first = min(first, __shfl_xor_sync(0xffffffffu, first, off));
  float mine = 0.0f;  // v[first % 8], picked without indexing v at run time (it stays in registers)
#pragma unroll
  for (int i = 0; i < 8; ++i)
    if (i == first % 8) mine = v[i];
  const float x_first = __shfl_sync(0xffffffffu, mine, first / 8 % 32);
  const float iscale = amax != 0.0f ? -127.0f / x_first : 0.0f;
  int sum = 0;
  int8_t* qb = q + g * 256 + 8 * lane;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int qv =
        amax != 0.0f ? static_cast<int>(fminf(127.0f, static_cast<float>(__float2int_rn(iscale * v[i])))) : 0;
    qb[i] = static_cast<int8_t>(qv);
    sum += qv;
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);  // the 4 lanes of a unit of 32
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  if (lane % 4 == 0) {
    const int64_t unit = g * 8 + lane / 4;  // row * units + unit, as units are 8 per block
    d[unit] = amax != 0.0f ? 1.0f / iscale : 0.0f;
    s[unit] = sum;
  }
}

// One warp per weight row of the group's matrices, taken in order.
template <ElemType T, int NT>
__global__ void matvecKernel(MatvecGroup g, ActRows a, int n_tokens) {
  int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const uint8_t* w = nullptr;
  size_t row_bytes = 0;
  int64_t rows = 0;
  float* y = nullptr;
#pragma unroll
  for (int m = 0; m < MatvecGroup::kMax; ++m) {  // unrolled: the group stays in parameter space
    if (m < g.count && w == nullptr) {
      if (r < g.rows[m]) {
        w = g.w[m], row_bytes = g.row_bytes[m], rows = g.rows[m], y = g.y[m];
      } else {
        r -= g.rows[m];
      }
    }
  }
  if (w == nullptr) return;  // past the last row: the whole warp leaves together
  const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
  for (int t0 = 0; t0 < n_tokens; t0 += NT) {
    const int nt = min(NT, n_tokens - t0);
    int64_t idx[NT];
    for (int i = 0; i < NT; ++i) idx[i] = t0 + i;
    float acc[NT];
    rowDot<T, NT>(row, a, idx, nt, acc);
    if (threadIdx.x % 32 == 0)
      for (int i = 0; i < nt; ++i) y[static_cast<int64_t>(t0 + i) * rows + r] = acc[i];
  }
}

template <ElemType T>
void launchMatvecT(const MatvecGroup& g, const ActRows& a, int n_tokens, cudaStream_t stream) {
  int64_t total = 0;
  for (int m = 0; m < g.count; ++m) total += g.rows[m];
  const auto blocks = static_cast<unsigned>((total + kWarps - 1) / kWarps);
  if (n_tokens == 1)
    launchKernel(matvecKernel<T, 1>, blocks, kWarps * 32, 0, stream, g, a, n_tokens);
  else
    launchKernel(matvecKernel<T, kTokenTile>, blocks, kWarps * 32, 0, stream, g, a, n_tokens);
}

}  // namespace

ActRows actRows(ElemType weights, const void* act, int64_t cols, int n_rows) {
  ActRows a;
  a.cols = cols;
  a.units = static_cast<int>(cols / 32);
  if (isFloatType(weights)) {
    a.f = static_cast<const float*>(act);
    return a;
  }
  // unitDot reads a unit's 32 activation bytes in two 16-byte loads.
  if (reinterpret_cast<uintptr_t>(act) % 16 != 0 || cols % 32 != 0)
    throw std::logic_error("quantised activations must start on a 16-byte boundary, in rows of whole units");
  const auto* base = static_cast<const uint8_t*>(act);
  const size_t q_bytes = static_cast<size_t>(n_rows) * cols;
  a.q = reinterpret_cast<const int8_t*>(base);
  a.d = reinterpret_cast<const float*>(base + q_bytes);
  a.s = reinterpret_cast<const int*>(base + q_bytes + static_cast<size_t>(n_rows) * a.units * sizeof(float));
  return a;
}

size_t quantizedActBytes(int64_t cols, int n_rows) {
  return static_cast<size_t>(n_rows) * (cols + (cols / 32) * (sizeof(float) + sizeof(int)));
}

void launchQuantizeActs(ElemType weights, const float* x, int64_t cols, int n_rows, void* act,
                        cudaStream_t stream) {
  if (isFloatType(weights) || n_rows <= 0) return;
  const bool q8k = usesQ8K(weights);
  const int64_t groups = static_cast<int64_t>(n_rows) * (cols / (q8k ? 256 : 32));
  const ActRows a = actRows(weights, act, cols, n_rows);
  launchKernel(quantizeActsKernel, static_cast<unsigned>((groups + kWarps - 1) / kWarps), kWarps * 32, 0,
               stream, x, groups, q8k, const_cast<int8_t*>(a.q), const_cast<float*>(a.d),
               const_cast<int*>(a.s));
  checkLaunch("quantize activations kernel");
}

void launchMatvecGroupQ(ElemType type, const MatvecGroup& group, const void* act, int64_t cols, int n_tokens,
                        cudaStream_t stream) {
  if (group.count <= 0 || group.count > MatvecGroup::kMax || n_tokens <= 0) return;
  const ActRows a = actRows(type, act, cols, n_tokens);
  withType(type, [&](auto t) { launchMatvecT<decltype(t)::value>(group, a, n_tokens, stream); });
  checkLaunch("matvec kernel");
}

void launchMatvecQ(ElemType type, const uint8_t* w, size_t row_bytes, int64_t rows, const void* act,
                   int64_t cols, int n_tokens, float* y, cudaStream_t stream) {
  if (rows <= 0) return;
  MatvecGroup g;
  g.count = 1;
  g.w[0] = w, g.row_bytes[0] = row_bytes, g.rows[0] = rows, g.y[0] = y;
  launchMatvecGroupQ(type, g, act, cols, n_tokens, stream);
}

}  // namespace moe::cuda
