// Launchers of the CUDA backend's own kernels (inference/cuda/*.cu). Every
// pointer is device memory unless named host_; every launch is queued on
// `stream` and checked (CudaError on a bad launch). Shapes as in backend.h.
// Kept free of project headers so the .cu files compile on their own.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace moe::cuda {

// The element types the kernels decode (the GGUF types the engine computes).
enum class ElemType {
  F32,
  F16,
  BF16,
  Q8_0,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  IQ4_NL,
  MXFP4,
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K,
  IQ4_XS,
  IQ1_S,
  IQ1_M,
  IQ2_XXS,
  IQ2_XS,
  IQ2_S,
  IQ3_XXS,
  IQ3_S
};

// Largest head_dim the attention kernels take: deepseek2's latent attention attends
// over rows of kv_lora + rope dims (512 + 64). Above 256 it must be a multiple of 8.
inline constexpr int kMaxHeadDim = 576;

// out[t][c] = decode(table row tokens[t])[c]; tokens: [n_tokens] device ints already range-checked.
void launchEmbed(ElemType type, const uint8_t* table, size_t row_bytes, int64_t cols, const int32_t* tokens,
                 int n_tokens, float* out, cudaStream_t stream);
// out[r][c] = decode(row r of w)[c] for r < n_rows; out: [n_rows][cols].
void launchDequantizeRows(ElemType type, const uint8_t* w, size_t row_bytes, int64_t cols, int64_t n_rows,
                          float* out, cudaStream_t stream);
// Activations quantised for `weights` (8-bit rows with per-32 scales and sums,
// cuda_quant.cuh): bytes for n_rows rows of cols (cols a multiple of 32, of 256
// for the K-quants). F32/F16/BF16 weights use the float rows as they are.
size_t quantizedActBytes(int64_t cols, int n_rows);
// x: [n_rows][cols] -> act (quantizedActBytes bytes); nothing for float-typed weights.
void launchQuantizeActs(ElemType weights, const float* x, int64_t cols, int n_rows, void* act,
                        cudaStream_t stream);
// y[t][r] = row r of w . activation row t, for r < rows, t < n_tokens. act: what
// launchQuantizeActs wrote for `type`, or the float rows x for float-typed weights.
void launchMatvecQ(ElemType type, const uint8_t* w, size_t row_bytes, int64_t rows, const void* act,
                   int64_t cols, int n_tokens, float* y, cudaStream_t stream);
// Up to kMax matrices of one type and width that read the same activations (q, k
// and v; gate and up) in one launch: matrix m's rows follow the earlier ones' in the
// grid, and its products go to y[m].
struct MatvecGroup {
  static constexpr int kMax = 4;
  int count = 0;
  const uint8_t* w[kMax] = {};
  size_t row_bytes[kMax] = {};
  int64_t rows[kMax] = {};
  float* y[kMax] = {};
};
void launchMatvecGroupQ(ElemType type, const MatvecGroup& group, const void* act, int64_t cols, int n_tokens,
                        cudaStream_t stream);

// The same product for many tokens on the int8 tensor cores (cuda_gemm.cu; quantised
// types only, compute capability >= kMinMmaComputeCapability of cuda_mma.cuh).
void launchGemmQ(ElemType type, const uint8_t* w, size_t row_bytes, int64_t rows, const void* act,
                 int64_t cols, int n_tokens, float* y, cudaStream_t stream);
// How often the GEMM reads each weight byte (once per 32 tokens) and each
// activation byte (once per 64 weight rows).
uint64_t gemmWeightPasses(int n_tokens);
uint64_t gemmActivationPasses(int64_t rows);
inline constexpr int kMinMmaComputeCapability = 80;  // major * 10 + minor

// An FFN's gated activation: silu(gate) * up, or gpt-oss's clamped variant
// (Backend::swigluClamped) when `clamped`.
// gemma4: gelu(gate) * up, gelu in its tanh form, when `gelu`.
struct Activation {
  bool clamped = false;
  float alpha = 0.0f, limit = 0.0f;
  bool gelu = false;
};

// The routed experts of one MoE layer (cuda_moe.cu). At most kMaxCallExperts experts
// per launch (their weight pointers travel in the kernel's arguments).
inline constexpr int kMaxCallExperts = 64;
inline constexpr int kMaxRouteExperts = 512;  // device routing: n_expert <= this
inline constexpr int kMaxRouteK = 64;         // and n_expert_used <= this
inline constexpr int kMaxRouteGroups = 64;    // and expert groups <= this
struct ExpertTable {
  int count = 0;
  int ids[kMaxCallExperts];
  const uint8_t* gate[kMaxCallExperts];  // [n_ff][n_embd] of expert ids[i]
  const uint8_t* up[kMaxCallExperts];    // [n_ff][n_embd]
  const uint8_t* down[kMaxCallExperts];  // [n_embd][n_ff]
};
// Every expert of one layer, indexed by expert id, in device memory: the call's
// experts are then the ones the routing (on the device) names, and the host never
// reads the ids.
struct LayerExperts {
  const uint8_t* const* gate = nullptr;  // [n_expert] device pointers
  const uint8_t* const* up = nullptr;
  const uint8_t* const* down = nullptr;
  int n_expert = 0;
};
// The plan's columns: one per expert of the call, each n_slots + 2 ints: the number
// of slots the expert serves, its id, then those slots in ascending order.
inline int64_t moePlanInts(int columns, int n_slots) { return int64_t(columns) * (n_slots + 2); }
// Columns of a call on a LayerExperts: the experts the routing can name at most.
inline int moeRoutedColumns(int n_expert, int n_slots) { return n_slots < n_expert ? n_slots : n_expert; }
struct MoeLaunch {
  ExpertTable table;   // the experts the host chose (when layer.n_expert == 0)
  LayerExperts layer;  // or every expert of the layer, picked by the device's routing
  ElemType up_type = ElemType::F32, down_type = ElemType::F32;  // gate and up share a type
  bool up_gemm = false, down_gemm = false;                      // the int8 GEMM forms (quantised types only)
  size_t up_row_bytes = 0, down_row_bytes = 0;
  int64_t n_embd = 0, n_ff = 0;
  int n_tokens = 0, k = 0, n_slots = 0;  // n_slots = n_tokens * k
  const float* x = nullptr;              // [n_tokens][n_embd] the layer's FFN input
  void* x_act = nullptr;                 // quantizedActBytes(n_embd, n_tokens)
  const int* ids = nullptr;              // [n_slots] the routing's expert ids
  int* plan = nullptr;                   // moePlanInts(columns, n_slots)
  float* h = nullptr;                    // [n_slots][n_ff] silu(gate) * up
  void* h_act = nullptr;                 // quantizedActBytes(n_ff, n_slots)
  float* outputs = nullptr;              // [n_slots][n_embd] each (token, rank)'s expert output
  Activation act;
  // gpt-oss: per expert a bias row added to its gate, up and down products
  // ([n_expert][n_ff], [n_expert][n_ff], [n_expert][n_embd], indexed by expert id), or null.
  const float* gate_bias = nullptr;
  const float* up_bias = nullptr;
  const float* down_bias = nullptr;
};
// logits: [n_tokens][n_expert] -> ids, weights: [n_tokens][k] (ties to the lower id;
// softmax or sigmoid gating; bias: [n_expert] added for choosing only, or null;
// groups > 1: chosen only within the group_used best of `groups` equal groups;
// norm: weights renormalised over the k; then * scale).
void launchRouteTopK(const float* logits, const float* bias, int n_tokens, int n_expert, int k, bool softmax,
                     bool norm, float scale, int groups, int group_used, int* ids, float* weights,
                     cudaStream_t stream);
// Fills the slots of every (token, rank) routed to the table's experts, or to any
// expert of the layer (m.layer).
void launchMoeExperts(const MoeLaunch& m, cudaStream_t stream);
// out[t] = sum over j ascending of weights[t][j] * slots[t * k + j]; out: [n_tokens][n_embd].
void launchMoeCombine(const float* slots, const float* weights, int n_tokens, int k, int64_t n_embd,
                      float* out, cudaStream_t stream);
// y[t] += sigmoid(gate_logits[t]) * x[t]; y, x: [n_rows][width].
void launchSigmoidGatedAdd(float* y, const float* x, const float* gate_logits, int n_rows, int64_t width,
                           cudaStream_t stream);

// x, y: [n_rows][dim] (may alias); weight: [dim] or nullptr.
void launchRmsNorm(const float* x, const float* weight, float* y, int n_rows, int dim, float eps,
                   cudaStream_t stream);
// x += delta, then y = rmsNorm(x), in one launch.
void launchAddRmsNorm(float* x, const float* delta, const float* weight, float* y, int n_rows, int dim,
                      float eps, cudaStream_t stream);
// x: [n_tokens][n_heads][head_dim], and x2 (may be null): [n_tokens][n_heads2][head_dim]
// at the same positions (q and k in one launch); cs: [n_tokens][n_rot] (cos, sin) pairs
// per rotated pair, computed on the host exactly as the CPU backend computes them.
// first_row (device memory, may be null): cs holds a row per position, and the tokens'
// rows start at *first_row (a recorded decode step reads its position there).
void launchRope(float* x, int n_heads, float* x2, int n_heads2, int n_tokens, int head_dim, int n_rot,
                const float* cs, bool neox, cudaStream_t stream, const int32_t* first_row = nullptr);
// The F16 KV cache (cuda_attention.cu). dst[i] = src[i] rounded to half (nearest
// even; beyond 65504 in magnitude: infinity), i < n; with src2, dst2[i] = src2[i] too.
// first_row (device memory, may be null): dst and dst2 start *first_row rows of
// row_elems elements further.
void launchStoreHalf(const float* src, __half* dst, const float* src2, __half* dst2, size_t n,
                     cudaStream_t stream, const int32_t* first_row = nullptr, size_t row_elems = 0);
// Causal GQA attention; see Backend::attention. q, out: [n_tokens][n_head][head_dim]
// float; k_cache, v_cache: [n_ctx][n_head_kv][head_dim] half. head_dim <= kMaxHeadDim.
// scratch: device memory of at least attentionScratchBytes(shape) bytes (the decode's
// per-chunk partials; nullptr when that is 0), not used by other work until this
// attention has run.
size_t attentionScratchBytes(int pos0, int n_tokens, int n_head, int n_head_kv, int head_dim);
// The largest attentionScratchBytes of any call within a context of n_ctx positions.
size_t attentionScratchBytesUpTo(int n_ctx, int n_head, int n_head_kv, int head_dim);
// Up to this many tokens attention runs as a decode (flash-decoding); more: prefill.
inline constexpr int kDecodeMaxTokens = 4;
// A decode's first position read from device memory when it runs (a recorded step
// replayed at later positions): pos0 there, at most plan_keys - n_tokens; the launch
// is planned for plan_keys keys (its chunks past the real keys stay empty).
struct DevicePosition {
  const int32_t* pos0 = nullptr;
  int plan_keys = 0;
};
// sinks: [n_head] logits that join each head's softmax denominator (gpt-oss), or
// null; window > 0: the query at position p sees keys p - window + 1 .. p only.
// With device_pos.pos0, `pos0` is only checked against the plan (the host's value
// of the step being recorded).
void launchAttention(const float* q, const __half* k_cache, const __half* v_cache, int pos0, int n_tokens,
                     int n_head, int n_head_kv, int head_dim, float scale, const float* sinks, int window,
                     float* out, float* scratch, size_t scratch_bytes, cudaStream_t stream,
                     const DevicePosition& device_pos = {});

// qwen35moe's gated delta-net (cuda_delta_net.cu; inference/delta_net.h has the math).
// x, out: [n_tokens][channels]; weight: [channels][kernel]; state: [kernel - 1][channels]
// the inputs before x's first row, advanced past its rows. out = silu(conv).
void launchConvSilu(const float* x, const float* weight, float* state, float* out, int n_tokens, int channels,
                    int kernel, cudaStream_t stream);
// In place, each of n_heads heads of head_dim floats of each row (at x + r * row_stride):
// x / max(|x|, eps) * scale.
void launchL2NormHeads(float* x, int n_rows, size_t row_stride, int n_heads, int head_dim, float eps,
                       float scale, cudaStream_t stream);
// The widest key head the delta rule takes (its state rows live in registers).
inline constexpr int kMaxDeltaHeadK = 256;
struct DeltaRuleLaunch {
  const float* x = nullptr;        // [n_tokens][2 * n_k_heads * head_k + n_v_heads * head_v]: q | k | v
  const float* alpha = nullptr;    // [n_tokens][n_v_heads]
  const float* beta = nullptr;     // [n_tokens][n_v_heads]
  const float* dt_bias = nullptr;  // [n_v_heads]
  const float* a = nullptr;        // [n_v_heads]
  float* state = nullptr;          // [n_v_heads][head_v][head_k], advanced
  float* out = nullptr;            // [n_tokens][n_v_heads * head_v]
  int n_tokens = 0, head_k = 0, head_v = 0, n_k_heads = 0, n_v_heads = 0;
};
void launchDeltaRule(const DeltaRuleLaunch& p, cudaStream_t stream);
// y = x / sqrt(mean(x^2) + eps) * weight * silu(gate), per row; x, gate, y: [n_rows][dim]
// (y may be x); weight: [dim].
void launchGatedRmsNorm(const float* x, const float* weight, const float* gate, float* y, int n_rows, int dim,
                        float eps, cudaStream_t stream);
// x[i] *= sigmoid(gate[i]).
void launchSigmoidGate(float* x, const float* gate, size_t n, cudaStream_t stream);

// out[i] = the gated activation of gate[i] and up[i].
void launchSwiglu(const float* gate, const float* up, float* out, size_t n, const Activation& act,
                  cudaStream_t stream);
void launchAdd(float* y, const float* x, size_t n, cudaStream_t stream);
// Row r < n_rows of `width` floats from src + r * src_stride to dst + r * dst_stride.
void launchCopyRows(float* dst, size_t dst_stride, const float* src, size_t src_stride, size_t width,
                    size_t n_rows, cudaStream_t stream);
void launchAxpy(float* y, const float* x, float a, size_t n, cudaStream_t stream);
// x[i] *= s
void launchScale(float* x, float s, size_t n, cudaStream_t stream);
// x[i] = cap * tanh(x[i] / cap)
void launchSoftcap(float* x, float cap, size_t n, cudaStream_t stream);
// routing's weights (after its n ids, int32 bits) times scales[id]: gemma4's expert output scales.
void launchScaleRouting(float* routing, size_t n, const float* scales, cudaStream_t stream);

// The sampler's first steps and a logits row's best entries (cuda_sampling.cu): the
// row sanitised (NaN -> -inf, +inf -> FLT_MAX), each penalised token's value divided
// by the penalty when positive, else multiplied, then the best k entries, higher value
// first, lower id on ties, {-inf, -1} past the row's end. Two passes: each block of the
// first sorts a chunk of kTopLogitsChunk entries in shared memory and writes its best k
// to `scratch`; one block merges them (k = 1: minimum reductions, no sort).
inline constexpr int kMaxTopLogits = 1024;
inline constexpr int kTopLogitsChunk = 2048;
struct TopLogit {
  float value;
  int32_t id;
};
size_t topLogitsScratchBytes(int n_vocab, int k);
// A step's sampling values as the kernels read them, uploaded before each step: the
// penalty's, then the draw's (launchDrawCandidate); `count` distinct token ids follow
// (ids outside the row: none).
struct SamplingValues {
  int32_t count;            // penalised ids after this header
  float penalty;            // > 0
  int32_t penalise_chosen;  // 1: the token at `chosen` is penalised too, unless listed
  int32_t unused;
  double uniform;          // in [0, 1): the host's, for this token
  double inv_temperature;  // 1.0 / double(temperature), as the host's sampler has it
  float top_p;             // >= 1: off
  float min_p;             // <= 0: off
};
inline constexpr int kPenaltyHeader = sizeof(SamplingValues) / sizeof(int32_t);  // the ids' first int
static_assert(sizeof(SamplingValues) == 40 && sizeof(SamplingValues) % sizeof(double) == 0,
              "the ids follow the header; a buffer of these stays aligned");
// logits: [n_vocab]; values: the header and its count ids; k in 1..kMaxTopLogits;
// scratch: topLogitsScratchBytes; out: [k]. chosen (device memory, or null): the token
// penalise_chosen adds, and where k = 1 writes the argmax's id (0 where the row has
// none), the token the next step embeds.
void launchTopLogits(const float* logits, int n_vocab, const SamplingValues* values, int k, void* scratch,
                     TopLogit* out, int32_t* chosen, cudaStream_t stream);
// The host sampler's draw (Sampler::sample(candidates)) over best[0, k), k = top_k + 1
// entries as launchTopLogits wrote them, with values' uniform, temperature, top_p and
// min_p (cuda_draw.cu): the token to *chosen, where the next step's embed reads it (0
// where the row has none), and its entry to *drawn ({-inf, -1} then). One block.
void launchDrawCandidate(const TopLogit* best, int k, const SamplingValues* values, int32_t* chosen,
                         TopLogit* drawn, cudaStream_t stream);

// An empty kernel: launching it proves the binary holds code this device can run.
void launchProbe(cudaStream_t stream);

}  // namespace moe::cuda
