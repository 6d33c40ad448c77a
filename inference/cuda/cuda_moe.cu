// The routed experts of a MoE layer on the device, in a fixed number of launches
// whatever the number of tokens or experts:
//   routeTopKKernel   router logits -> top-k expert ids and mixing weights per token
//   planKernel        for each expert of the call, the (token, rank) slots it serves
//   gateUpKernel      silu(gate . x) * (up . x) of every served slot, all experts at once
//                     (gpt-oss: each product plus its expert's bias, the clamped SwiGLU)
//   (quantizeActsKernel of cuda_matvec.cu on those rows)
//   downKernel        down . h into each slot's row of the slot buffer
// (gate/up and down as int8 tensor-core GEMMs, cuda_gemm.cuh, when the call asks:
// prefill on quantised experts)
//   combineKernel     out[t] = sum over ranks j (ascending) of weight[t][j] * slot[t][j]
// Each slot's output depends only on its own token's row and its expert's weights,
// and the sum runs in rank order, so the result is the same bits whichever experts
// share a call, in whatever order: every caching policy computes the same.
#include <math.h>
#include <stdexcept>
#include <string>

#include "inference/cuda/cuda_activation.cuh"
#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_gemm.cuh"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda/cuda_launch.h"
#include "inference/cuda/cuda_quant.cuh"

namespace moe::cuda {
namespace {

constexpr int kWarps = 4;  // weight rows per block
constexpr int kTokenTile = 8;
constexpr int kRouteThreads = 64;  // a token's experts are few (<= kMaxRouteExperts): 8 each at most

constexpr double kTaken = -1e300;     // below every (biased) probability
constexpr double kExcluded = -1e299;  // an expert of a group left out: above kTaken, below the rest

// Group-limited routing (one thread): a group's score is the sum of its two largest
// selection scores (one, for groups of one); the experts outside the group_used
// best groups (ties: the lower group) get kExcluded, which ranks them, among
// themselves by id, after every other expert, as the CPU's -inf does.
// score and kept: kMaxRouteGroups of shared scratch.
__device__ void excludeWeakGroups(double* choice, int n_expert, int groups, int group_used, double* score,
                                  bool* kept) {
  const int per_group = n_expert / groups;
  for (int g = 0; g < groups; ++g) {
    double first = -INFINITY, second = -INFINITY;
    for (int e = g * per_group; e < (g + 1) * per_group; ++e) {
      const double c = choice[e];
      if (c > first)
        second = first, first = c;
      else if (c > second)
        second = c;
    }
    score[g] = per_group >= 2 ? 0.0 + first + second : 0.0 + first;
  }
  for (int g = 0; g < groups; ++g) kept[g] = false;
  for (int i = 0; i < group_used; ++i) {
    int best = -1;
    for (int g = 0; g < groups; ++g)
      if (!kept[g] && (best < 0 || score[g] > score[best])) best = g;
    kept[best] = true;
  }
  for (int g = 0; g < groups; ++g)
    if (!kept[g])
      for (int e = g * per_group; e < (g + 1) * per_group; ++e) choice[e] = kExcluded;
}

// One block per token. Probabilities in double, top-k by probability (plus the
// selection bias, when given; within the best groups, when groups > 1) with ties to
// the lower id, weights the unbiased probabilities, optional renormalisation, then
// the scale: the CPU's routeToken.
__global__ void routeTopKKernel(const float* logits, const float* bias, int n_expert, int k, bool softmax,
                                bool norm, float scale, int groups, int group_used, int* ids,
                                float* weights) {
  __shared__ double p[kMaxRouteExperts];
  __shared__ double choice[kMaxRouteExperts];
  __shared__ double chosen_p[kMaxRouteK];
  __shared__ double total;
  __shared__ double group_score[kMaxRouteGroups];
  __shared__ bool group_kept[kMaxRouteGroups];
  const int t = blockIdx.x;
  const float* row = logits + static_cast<int64_t>(t) * n_expert;
  if (softmax) {
    if (threadIdx.x == 0) {
      float mx = row[0];
      for (int e = 1; e < n_expert; ++e) mx = fmaxf(mx, row[e]);
      total = static_cast<double>(mx);
    }
    __syncthreads();
    const double mx = total;
    __syncthreads();
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x) p[e] = exp(static_cast<double>(row[e]) - mx);
    __syncthreads();
    if (threadIdx.x == 0) {  // summed in expert order, as the CPU does
      double sum = 0;
      for (int e = 0; e < n_expert; ++e) sum += p[e];
      total = sum;
    }
    __syncthreads();
    const double sum = total;
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x) p[e] /= sum;
  } else {
    for (int e = threadIdx.x; e < n_expert; e += blockDim.x)
      p[e] = 1.0 / (1.0 + exp(-static_cast<double>(row[e])));
  }
  __syncthreads();
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) choice[e] = bias ? p[e] + double(bias[e]) : p[e];
  __syncthreads();
  if (groups > 1) {
    if (threadIdx.x == 0) excludeWeakGroups(choice, n_expert, groups, group_used, group_score, group_kept);
    __syncthreads();
  }
  if (threadIdx.x >= 32) return;  // warp 0 picks the k largest
  // Every lane ends each round knowing the winner; the lane that owns its entry
  // (e % 32 == lane) marks it taken, and only that lane ever reads it again.
  const int lane = threadIdx.x;
  int* out_ids = ids + static_cast<int64_t>(t) * k;
  double chosen_sum = 0;
  for (int i = 0; i < k; ++i) {
    double best = kTaken;
    int best_id = n_expert;
    for (int e = lane; e < n_expert; e += 32)
      if (choice[e] > best || (choice[e] == best && e < best_id)) best = choice[e], best_id = e;
    for (int off = 16; off > 0; off /= 2) {
      const double ob = __shfl_xor_sync(0xffffffffu, best, off);
      const int oid = __shfl_xor_sync(0xffffffffu, best_id, off);
      if (ob > best || (ob == best && oid < best_id)) best = ob, best_id = oid;
    }
    if (best_id % 32 == lane) choice[best_id] = kTaken;
    const double prob = p[best_id];  // the owning lane changed only choice[]
    if (lane == 0) out_ids[i] = best_id, chosen_p[i] = prob;
    chosen_sum += prob;
  }
  if (lane == 0)
    for (int i = 0; i < k; ++i) {
      double wgt = chosen_p[i];
      if (norm) wgt /= chosen_sum;
      weights[static_cast<int64_t>(t) * k + i] = static_cast<float>(wgt * static_cast<double>(scale));
    }
}

// Block b lists the slots (t * k + j) whose id is table.ids[b], in slot order:
// column b of the plan (moePlanInts).
__global__ void planKernel(const int* ids, int n_slots, ExpertTable table, int* plan) {
  if (threadIdx.x != 0) return;
  const int expert = table.ids[blockIdx.x];
  int* out = plan + static_cast<int64_t>(blockIdx.x) * (n_slots + 2);
  int count = 0;
  for (int s = 0; s < n_slots; ++s)
    if (ids[s] == expert) out[2 + count++] = s;
  out[0] = count;
  out[1] = expert;
}

// One block: the experts the routing names, in ascending id, get the plan's
// columns 0..used-1 (the rest count 0 slots). ids outside 0..n_expert-1 are served
// by no column.
constexpr int kPlanThreads = 256;
__global__ void planRoutedKernel(const int* ids, int n_slots, int n_expert, int columns, int* plan) {
  __shared__ int column_of[kMaxRouteExperts];
  __shared__ int used;
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) column_of[e] = 0;
  __syncthreads();
  for (int s = threadIdx.x; s < n_slots; s += blockDim.x) {
    const int e = ids[s];
    if (e >= 0 && e < n_expert) column_of[e] = 1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int next = 0;
    for (int e = 0; e < n_expert; ++e) column_of[e] = column_of[e] ? next++ : -1;
    used = next;
  }
  __syncthreads();
  for (int c = used + static_cast<int>(threadIdx.x); c < columns; c += blockDim.x)
    plan[static_cast<int64_t>(c) * (n_slots + 2)] = 0;
  for (int e = threadIdx.x; e < n_expert; e += blockDim.x) {
    const int c = column_of[e];
    if (c < 0) continue;
    int* out = plan + static_cast<int64_t>(c) * (n_slots + 2);
    int count = 0;
    for (int s = 0; s < n_slots; ++s)
      if (ids[s] == e) out[2 + count++] = s;
    out[0] = count;
    out[1] = e;
  }
}

// Column `col` of the plan: its expert, its slots and its weights.
struct PlanColumn {
  int count;
  int expert;
  const int* slots;
};
__device__ __forceinline__ PlanColumn planColumn(const int* plan, int n_slots, int col) {
  const int* p = plan + static_cast<int64_t>(col) * (n_slots + 2);
  return {p[0], p[1], p + 2};
}
// The experts' weights by column (the host's table) or by id (every expert of the layer).
struct ExpertWeightsOf {
  ExpertTable table;
  LayerExperts layer;
  __device__ __forceinline__ const uint8_t* gate(int col, int expert) const {
    return layer.gate ? layer.gate[expert] : table.gate[col];
  }
  __device__ __forceinline__ const uint8_t* up(int col, int expert) const {
    return layer.up ? layer.up[expert] : table.up[col];
  }
  __device__ __forceinline__ const uint8_t* down(int col, int expert) const {
    return layer.down ? layer.down[expert] : table.down[col];
  }
};

// grid (row blocks of n_ff, experts of the call). x: acts of the layer input, one
// row per token; h: [n_slots][n_ff].
// An expert's bias for row r of a product (gpt-oss), 0 without biases.
__device__ __forceinline__ float expertBias(const float* bias, int expert, int64_t width, int64_t r) {
  return bias ? bias[static_cast<int64_t>(expert) * width + r] : 0.0f;
}

// The epilogue of gate and up: biases (when given), then the gated activation.
struct GateUpEpilogue {
  Activation act;
  const float *gate_bias, *up_bias;
  __device__ __forceinline__ float operator()(float g, float u, int expert, int64_t n_ff, int64_t r) const {
    if (gate_bias) g = __fadd_rn(g, expertBias(gate_bias, expert, n_ff, r));
    if (up_bias) u = __fadd_rn(u, expertBias(up_bias, expert, n_ff, r));
    return gatedActivation(g, u, act);
  }
};

template <ElemType T>
__global__ void gateUpKernel(ExpertWeightsOf w, size_t row_bytes, int64_t n_ff, ActRows x, int k,
                             const int* plan, int n_slots, float* h, GateUpEpilogue epi) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= n_ff) return;
  const PlanColumn col = planColumn(plan, n_slots, blockIdx.y);
  if (col.count == 0) return;
  const uint8_t* gate = w.gate(blockIdx.y, col.expert) + static_cast<size_t>(r) * row_bytes;
  const uint8_t* up = w.up(blockIdx.y, col.expert) + static_cast<size_t>(r) * row_bytes;
  for (int i0 = 0; i0 < col.count; i0 += kTokenTile) {
    const int nt = min(kTokenTile, col.count - i0);
    int64_t tok[kTokenTile];
    for (int i = 0; i < kTokenTile; ++i) tok[i] = i < nt ? col.slots[i0 + i] / k : 0;
    float g[kTokenTile], u[kTokenTile];
    rowDot<T, kTokenTile>(gate, x, tok, nt, g);
    rowDot<T, kTokenTile>(up, x, tok, nt, u);
    if (threadIdx.x % 32 == 0)
      for (int i = 0; i < nt; ++i)
        h[static_cast<int64_t>(col.slots[i0 + i]) * n_ff + r] = epi(g[i], u[i], col.expert, n_ff, r);
  }
}

// grid (row blocks of n_embd, experts of the call). hq: acts of h, one row per slot.
template <ElemType T>
__global__ void downKernel(ExpertWeightsOf w, size_t row_bytes, int64_t n_embd, ActRows hq, const int* plan,
                           int n_slots, float* slots, const float* down_bias) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (r >= n_embd) return;
  const PlanColumn col = planColumn(plan, n_slots, blockIdx.y);
  if (col.count == 0) return;
  const uint8_t* down = w.down(blockIdx.y, col.expert) + static_cast<size_t>(r) * row_bytes;
  for (int i0 = 0; i0 < col.count; i0 += kTokenTile) {
    const int nt = min(kTokenTile, col.count - i0);
    int64_t slot[kTokenTile];
    for (int i = 0; i < kTokenTile; ++i) slot[i] = i < nt ? col.slots[i0 + i] : 0;
    float y[kTokenTile];
    rowDot<T, kTokenTile>(down, hq, slot, nt, y);
    if (threadIdx.x % 32 == 0)
      for (int i = 0; i < nt; ++i)
        slots[slot[i] * n_embd + r] =
            down_bias ? __fadd_rn(y[i], expertBias(down_bias, col.expert, n_embd, r)) : y[i];
  }
}

// The GEMM forms: grid (row blocks of kGemmRows, blocks of kGemmTokens of an
// expert's slots, experts of the call); a block past its expert's count leaves.
// Fills the block's slot list and activation rows (slot / k for the layer input,
// the slot itself for h); returns whether the block has work.
__device__ __forceinline__ bool gemmSlots(const PlanColumn& col, int k, int* slots, int64_t* act_rows) {
  const int i0 = static_cast<int>(blockIdx.y) * kGemmTokens;
  if (i0 >= col.count) return false;  // the same for every thread of the block
  if (threadIdx.x < kGemmTokens) {
    const int i = i0 + static_cast<int>(threadIdx.x);
    slots[threadIdx.x] = i < col.count ? col.slots[i] : -1;
    act_rows[threadIdx.x] = i < col.count ? (k > 0 ? col.slots[i] / k : col.slots[i]) : -1;
  }
  __syncthreads();
  return true;
}

template <ElemType T>
__global__ void __launch_bounds__(kGemmThreads)
    gateUpGemmKernel(ExpertWeightsOf w, size_t row_bytes, int64_t n_ff, ActRows x, int k, const int* plan,
                     int n_slots, float* h, GateUpEpilogue epi) {
  __shared__ GemmTiles tiles;
  __shared__ int slots[kGemmTokens];
  __shared__ int64_t act_rows[kGemmTokens];
  const PlanColumn col = planColumn(plan, n_slots, blockIdx.z);
  if (!gemmSlots(col, k, slots, act_rows)) return;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kGemmRows;
  GemmAcc g = {}, u = {};
  gemmTile<T>(tiles, w.gate(blockIdx.z, col.expert), row_bytes, n_ff, row0, x, act_rows, g);
  gemmTile<T>(tiles, w.up(blockIdx.z, col.expert), row_bytes, n_ff, row0, x, act_rows, u);
#pragma unroll
  for (int j = 0; j < kGemmTokens / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t r = row0 + gemmAccRow(i);
      const int slot = slots[gemmAccToken(j, i)];
      if (r < n_ff && slot >= 0)
        h[static_cast<int64_t>(slot) * n_ff + r] = epi(g[j][i], u[j][i], col.expert, n_ff, r);
    }
}

template <ElemType T>
__global__ void __launch_bounds__(kGemmThreads)
    downGemmKernel(ExpertWeightsOf w, size_t row_bytes, int64_t n_embd, ActRows hq, const int* plan,
                   int n_slots, float* outputs, const float* down_bias) {
  __shared__ GemmTiles tiles;
  __shared__ int slots[kGemmTokens];
  __shared__ int64_t act_rows[kGemmTokens];
  const PlanColumn col = planColumn(plan, n_slots, blockIdx.z);
  if (!gemmSlots(col, 0, slots, act_rows)) return;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kGemmRows;
  GemmAcc y = {};
  gemmTile<T>(tiles, w.down(blockIdx.z, col.expert), row_bytes, n_embd, row0, hq, act_rows, y);
#pragma unroll
  for (int j = 0; j < kGemmTokens / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t r = row0 + gemmAccRow(i);
      const int slot = slots[gemmAccToken(j, i)];
      if (r < n_embd && slot >= 0)
        outputs[static_cast<int64_t>(slot) * n_embd + r] =
            down_bias ? __fadd_rn(y[j][i], expertBias(down_bias, col.expert, n_embd, r)) : y[j][i];
    }
}

__global__ void combineKernel(const float* slots, const float* weights, int n_tokens, int k, int64_t n_embd,
                              float* out) {
  const int64_t total = static_cast<int64_t>(n_tokens) * n_embd;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t t = i / n_embd, c = i % n_embd;
    float acc = 0.0f;
    for (int j = 0; j < k; ++j)
      acc = __fadd_rn(acc, __fmul_rn(weights[t * k + j], slots[(t * k + j) * n_embd + c]));
    out[i] = acc;
  }
}

__global__ void sigmoidGatedAddKernel(float* y, const float* x, const float* gate_logits, int64_t width,
                                      int64_t total) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const float g = 1.0f / (1.0f + expf(-gate_logits[i / width]));
    y[i] = __fadd_rn(y[i], __fmul_rn(g, x[i]));
  }
}

unsigned gridFor(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < (int64_t{1} << 20) ? (blocks > 0 ? blocks : 1) : (int64_t{1} << 20));
}

// The plan's columns: the host's table, or as many as the routing may name.
int columnsOf(const MoeLaunch& m) {
  return m.layer.n_expert > 0 ? moeRoutedColumns(m.layer.n_expert, m.n_slots) : m.table.count;
}

ExpertWeightsOf weightsOf(const MoeLaunch& m) { return {m.table, m.layer}; }

dim3 gemmGrid(int64_t rows, const MoeLaunch& m) {
  return dim3(static_cast<unsigned>((rows + kGemmRows - 1) / kGemmRows),
              static_cast<unsigned>((m.n_tokens + kGemmTokens - 1) / kGemmTokens),
              static_cast<unsigned>(columnsOf(m)));
}

template <ElemType T>
void launchExpertsT(const MoeLaunch& m, cudaStream_t stream) {
  const ActRows x =
      actRows(T, isFloatType(T) ? static_cast<const void*>(m.x) : m.x_act, m.n_embd, m.n_tokens);
  const GateUpEpilogue epi{m.act, m.gate_bias, m.up_bias};
  if constexpr (!isFloatType(T))
    if (m.up_gemm) {
      launchKernel(gateUpGemmKernel<T>, gemmGrid(m.n_ff, m), kGemmThreads, 0, stream, weightsOf(m),
                   m.up_row_bytes, m.n_ff, x, m.k, m.plan, m.n_slots, m.h, epi);
      checkLaunch("MoE gate/up GEMM kernel");
      return;
    }
  const dim3 up_grid(static_cast<unsigned>((m.n_ff + kWarps - 1) / kWarps),
                     static_cast<unsigned>(columnsOf(m)));
  launchKernel(gateUpKernel<T>, up_grid, kWarps * 32, 0, stream, weightsOf(m), m.up_row_bytes, m.n_ff, x, m.k,
               m.plan, m.n_slots, m.h, epi);
  checkLaunch("MoE gate/up kernel");
}

template <ElemType T>
void launchDownT(const MoeLaunch& m, cudaStream_t stream) {
  const ActRows hq = actRows(T, isFloatType(T) ? static_cast<const void*>(m.h) : m.h_act, m.n_ff, m.n_slots);
  if constexpr (!isFloatType(T))
    if (m.down_gemm) {
      launchKernel(downGemmKernel<T>, gemmGrid(m.n_embd, m), kGemmThreads, 0, stream, weightsOf(m),
                   m.down_row_bytes, m.n_embd, hq, m.plan, m.n_slots, m.outputs, m.down_bias);
      checkLaunch("MoE down GEMM kernel");
      return;
    }
  const dim3 grid(static_cast<unsigned>((m.n_embd + kWarps - 1) / kWarps),
                  static_cast<unsigned>(columnsOf(m)));
  launchKernel(downKernel<T>, grid, kWarps * 32, 0, stream, weightsOf(m), m.down_row_bytes, m.n_embd, hq,
               m.plan, m.n_slots, m.outputs, m.down_bias);
  checkLaunch("MoE down kernel");
}

}  // namespace

void launchRouteTopK(const float* logits, const float* bias, int n_tokens, int n_expert, int k, bool softmax,
                     bool norm, float scale, int groups, int group_used, int* ids, float* weights,
                     cudaStream_t stream) {
  if (n_tokens <= 0) return;
  if (groups > 1 &&
      (groups > kMaxRouteGroups || n_expert % groups != 0 || group_used <= 0 || group_used >= groups))
    throw std::invalid_argument("MoE routing: " + std::to_string(group_used) + " of " +
                                std::to_string(groups) + " expert groups");
  launchKernel(routeTopKKernel, static_cast<unsigned>(n_tokens), kRouteThreads, 0, stream, logits, bias,
               n_expert, k, softmax, norm, scale, groups > 1 ? groups : 0, group_used, ids, weights);
  checkLaunch("MoE routing kernel");
}

void launchMoeExperts(const MoeLaunch& m, cudaStream_t stream) {
  if (m.layer.n_expert > kMaxRouteExperts)
    throw std::invalid_argument("MoE experts: " + std::to_string(m.layer.n_expert) +
                                " experts in a layer, more than the device plan takes");
  if (m.layer.n_expert > 0) {
    launchKernel(planRoutedKernel, 1u, kPlanThreads, 0, stream, m.ids, m.n_slots, m.layer.n_expert,
                 columnsOf(m), m.plan);
  } else {
    if (m.table.count <= 0) return;
    launchKernel(planKernel, static_cast<unsigned>(m.table.count), 32, 0, stream, m.ids, m.n_slots, m.table,
                 m.plan);
  }
  checkLaunch("MoE plan kernel");
  launchQuantizeActs(m.up_type, m.x, m.n_embd, m.n_tokens, m.x_act, stream);
  withType(m.up_type, [&](auto type) { launchExpertsT<decltype(type)::value>(m, stream); });
  launchQuantizeActs(m.down_type, m.h, m.n_ff, m.n_slots, m.h_act, stream);
  withType(m.down_type, [&](auto type) { launchDownT<decltype(type)::value>(m, stream); });
}

void launchMoeCombine(const float* slots, const float* weights, int n_tokens, int k, int64_t n_embd,
                      float* out, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(n_tokens) * n_embd;
  if (total <= 0) return;
  launchKernel(combineKernel, gridFor(total, 256), 256, 0, stream, slots, weights, n_tokens, k, n_embd, out);
  checkLaunch("MoE combine kernel");
}

void launchSigmoidGatedAdd(float* y, const float* x, const float* gate_logits, int n_rows, int64_t width,
                           cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(n_rows) * width;
  if (total <= 0) return;
  launchKernel(sigmoidGatedAddKernel, gridFor(total, 256), 256, 0, stream, y, x, gate_logits, width, total);
  checkLaunch("sigmoid-gated add kernel");
}

}  // namespace moe::cuda
