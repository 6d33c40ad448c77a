// The compute interface the forward pass is written against. Buffers are
// backend memory (host memory for the CPU backend, device memory for CUDA);
// shapes are given in comments as [outer][inner], inner contiguous.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "inference/device_error.h"
#include "inference/expert_source.h"
#include "inference/logit_candidates.h"
#include "inference/model_config.h"
#include "inference/routing.h"
#include "inference/weight.h"

namespace moe {

struct AttentionShape {
  int n_head = 0;
  int n_head_kv = 0;  // GQA: query head h reads kv head h / (n_head / n_head_kv)
  int head_dim = 0;
  float scale = 0.0f;  // usually 1/sqrt(head_dim)
  // gpt-oss: per head a learned logit that joins the softmax's denominator ("sink"):
  // [n_head] in backend memory, or null.
  const float* sinks = nullptr;
  // > 0: the query at position p sees only keys p - window + 1 .. p (sliding window).
  int window = 0;
};

// The element type a KV cache stores: F32 (the CPU backend) or IEEE half, F16
// (the CUDA backend: half the bytes attention reads; values rounded to nearest
// even when stored).
enum class KvType { F32, F16 };
inline constexpr size_t kvTypeBytes(KvType t) { return t == KvType::F16 ? 2 : 4; }

// One K or V cache buffer in backend memory: n_elems elements of `type`, laid out
// [n_ctx][n_head_kv][head_dim]. Made by Backend::allocKv, written by storeKv, read
// by attention, freed by freeKv; a plain handle (copying it copies no memory).
struct KvCache {
  void* data = nullptr;
  KvType type = KvType::F32;
  size_t n_elems = 0;
};

// Whether attention of n_tokens queries at pos0.. finds all its rows (0 .. pos0 +
// n_tokens - 1) in a cache of n_elems elements.
inline bool kvHoldsRows(const KvCache& kv, int pos0, int n_tokens, const AttentionShape& shape) {
  const int64_t rows = int64_t{pos0} + (n_tokens > 0 ? n_tokens : 0);
  return rows >= 0 && uint64_t(rows) * uint64_t(shape.n_head_kv) * uint64_t(shape.head_dim) <= kv.n_elems;
}

// Where a backend computes: the host CPU or a CUDA device.
enum class Device { kCpu, kCuda };

// A decode step's recording broke (Backend::beginStepCapture): nothing of it ran.
// `for_good`: steps will not record on this backend (a wait, a failed recording);
// false: only this one (it needed an upload first: the step after it may record).
class StepCaptureFailed : public std::runtime_error {
 public:
  explicit StepCaptureFailed(const std::string& what, bool for_good = true)
      : std::runtime_error(what), for_good(for_good) {}
  bool for_good;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  // The device's memory in use (by every program) and its size, in bytes; false
  // where there is no separate device memory (the CPU). Call on the compute thread.
  virtual bool deviceMemory(uint64_t& /*used*/, uint64_t& /*total*/) { return false; }

  // Allocation of activations, zero-filled.
  virtual float* allocFloats(size_t n) = 0;
  // freeFloats, freeKv and releaseWeight are called from destructors: a device error
  // while freeing (a GPU that has faulted) is not thrown; the memory goes either way.
  virtual void freeFloats(float* p) = 0;
  // A KV cache buffer of n_elems elements, zero-filled, in the type this backend's
  // attention reads. Default: F32 from allocFloats (freeKv: freeFloats).
  virtual KvCache allocKv(size_t n_elems) { return {allocFloats(n_elems), KvType::F32, n_elems}; }
  virtual void freeKv(const KvCache& kv) { freeFloats(static_cast<float*>(kv.data)); }
  // Elements [first, first + n) of dst = src[0..n) (backend memory), converted to
  // dst.type (F16: round to nearest even). Default: F32 caches, by copy.
  virtual void storeKv(const KvCache& dst, size_t first, const float* src, size_t n);
  // Both caches of a layer at once (k_src and v_src into k_dst and v_dst at `first`).
  // Default: storeKv twice; a device backend stores both in one launch.
  virtual void storeKvPair(const KvCache& k_dst, const KvCache& v_dst, size_t first, const float* k_src,
                           const float* v_src, size_t n) {
    storeKv(k_dst, first, k_src, n);
    storeKv(v_dst, first, v_src, n);
  }
  // Makes a weight usable by this backend: the CPU backend keeps the view as is or
  // repacks it into interleaved row groups, the CUDA backend uploads it. The view
  // stays valid until releaseWeight or the backend's end; `host` may go at once.
  virtual WeightView prepareWeight(const WeightView& host) = 0;
  // Allocates now the working memory a forward pass of this model will need (up to
  // max_tokens tokens a step, a context of n_ctx), so that running out of memory is
  // reported when a session starts, not in the middle of a reply. Default: nothing.
  virtual void reserveScratch(const ModelConfig& c, int max_tokens, int n_ctx) {
    (void)c, (void)max_tokens, (void)n_ctx;
  }
  // The rope a layer turns q and k by: pair i of n_rot turns by pos * base^(-2i/n_rot),
  // YaRN-scaled where yarn is active, divided by factors[i] where there are factors.
  struct RopeParams {
    int n_rot = 0;
    float base = 0.0f;
    RopeYarn yarn;                   // factor 1: none
    std::span<const float> factors;  // [n_rot / 2] host memory, or empty
  };
  // Readies, for each of `ropes` (every rope the model's layers turn by), what a
  // recorded decode step's rope reads at positions below n_ctx (a device backend: a
  // cos/sin table of every position, built once). Call after reserveScratch. Default:
  // nothing.
  virtual void reserveRopes(std::span<const RopeParams> ropes, int n_ctx) { (void)ropes, (void)n_ctx; }
  // Frees what prepareWeight made for `prepared` (nothing where it kept the view).
  virtual void releaseWeight(const WeightView& prepared) { (void)prepared; }

  // out[t][0..cols) = row tokens[t] of table (any supported type).
  virtual void embed(const WeightView& table, const int32_t* tokens, int n_tokens, float* out) = 0;
  // y[t][0..w.rows) = W · x[t]   x: [n_tokens][w.cols]
  virtual void matmul(const WeightView& w, const float* x, float* y, int n_tokens) = 0;
  // Several matmuls at once (e.g. the gate and up projections of every expert of
  // a layer): a backend may run them as one parallel loop. No job's y may overlap
  // another job's x or y. Default: one after another.
  struct MatmulJob {
    WeightView w;
    const float* x;
    float* y;
    int n_tokens;
  };
  virtual void matmulMany(std::span<const MatmulJob> jobs) {
    for (const MatmulJob& j : jobs) matmul(j.w, j.x, j.y, j.n_tokens);
  }
  // y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * weight   (weight: [dim] F32, any row count)
  virtual void rmsNorm(const float* x, const float* weight, float* y, int n_rows, int dim, float eps) = 0;
  // x += delta, then y = rmsNorm(x): the residual add and the next block's norm (x, delta:
  // [n_rows][dim], y another buffer). Default: add, then rmsNorm; a device backend does
  // both in one launch (the same arithmetic).
  virtual void addRmsNorm(float* x, const float* delta, const float* weight, float* y, int n_rows, int dim,
                          float eps) {
    add(x, delta, static_cast<size_t>(n_rows) * dim);
    rmsNorm(x, weight, y, n_rows, dim, eps);
  }
  // In place, x: [n_tokens][n_heads][head_dim]; the first n_rot dims of each head rotate
  // by positions[t] * base^(-2i/n_rot).
  virtual void rope(float* x, int n_tokens, int n_heads, int head_dim, int n_rot, const int32_t* positions,
                    float freq_base, RopeStyle style) = 0;
  // rope of q ([n_tokens][n_head][head_dim]) and k ([n_tokens][n_head_kv][head_dim]) at
  // the same positions. Default: rope twice; a device backend does both in one launch.
  virtual void ropePair(float* q, int n_head, float* k, int n_head_kv, int n_tokens, int head_dim, int n_rot,
                        const int32_t* positions, float freq_base, RopeStyle style) {
    rope(q, n_tokens, n_head, head_dim, n_rot, positions, freq_base, style);
    rope(k, n_tokens, n_head_kv, head_dim, n_rot, positions, freq_base, style);
  }
  // rope with YaRN scaling (RopeYarn). Backends without it throw std::invalid_argument.
  virtual void ropeYarn(float* x, int n_tokens, int n_heads, int head_dim, int n_rot,
                        const int32_t* positions, float freq_base, RopeStyle style, const RopeYarn& yarn);
  // Causal attention of n_tokens queries at positions pos0.. over the cache rows 0..pos0+t.
  // q: [n_tokens][n_head][head_dim]; k_cache, v_cache: [n_ctx][n_head_kv][head_dim] of
  // the type allocKv gives (a backend may refuse another: std::invalid_argument), at
  // least pos0 + n_tokens rows; out: [n_tokens][n_head][head_dim]
  virtual void attention(const float* q, const KvCache& k_cache, const KvCache& v_cache, int pos0,
                         int n_tokens, const AttentionShape& shape, float* out) = 0;
  // out[i] = silu(gate[i]) * up[i]
  virtual void swiglu(const float* gate, const float* up, float* out, size_t n) = 0;
  // gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clamp(up, -limit, limit),
  // out = g * sigmoid(alpha * g) * (u + 1). Backends without it throw std::invalid_argument.
  virtual void swigluClamped(const float* gate, const float* up, float* out, size_t n, float alpha,
                             float limit);
  // y[i] += x[i]
  virtual void add(float* y, const float* x, size_t n) = 0;
  // y[i] += a * x[i]
  virtual void axpy(float* y, const float* x, float a, size_t n) = 0;
  virtual void copy(float* dst, const float* src, size_t n) = 0;
  // n_rows rows of `width`: row r from src + r * src_stride to dst + r * dst_stride
  // (strides in floats; no row may overlap another's source or destination).
  // Default: one copy per row; a device backend does them in one launch.
  virtual void copyRows(float* dst, size_t dst_stride, const float* src, size_t src_stride, size_t width,
                        size_t n_rows) {
    for (size_t r = 0; r < n_rows; ++r) copy(dst + r * dst_stride, src + r * src_stride, width);
  }
  // y[i] = 0, queued like any kernel (no host round trip).
  virtual void zero(float* y, size_t n) = 0;
  // y[t] += sigmoid(gate_logits[t]) * x[t]   y, x: [n_rows][width]; gate_logits: [n_rows]
  // (qwen2moe's shared-expert gate). Default: the logits to the host, then axpy per row.
  virtual void sigmoidGatedAdd(float* y, const float* x, const float* gate_logits, int n_rows, int width);

  // qwen35moe's gated delta-net layers (inference/delta_net.h has the math) and its
  // gated full attention. The recurrent state is backend memory the caller owns and
  // these ops advance in place. Defaults throw std::invalid_argument.
  // Causal depthwise conv of width `kernel`, then SiLU: x, out: [n_tokens][channels]
  // (not overlapping); weight: [channels][kernel]; state: [kernel - 1][channels] the
  // inputs before x's first row, oldest first, advanced past x's rows.
  virtual void convSilu(const float* x, const float* weight, float* state, float* out, int n_tokens,
                        int channels, int kernel);
  // In place, each of n_heads heads of head_dim floats of each row (row r at x + r *
  // row_stride): x / max(|x|, eps) * scale.
  virtual void l2NormHeads(float* x, int n_rows, size_t row_stride, int n_heads, int head_dim, float eps,
                           float scale);
  // The gated delta rule over n_tokens tokens, token after token (deltanet::deltaRule).
  struct DeltaRuleCall {
    const float* x = nullptr;        // [n_tokens][conv_channels]: q (normalised, scaled), k (normalised), v
    const float* alpha = nullptr;    // [n_tokens][n_v_heads] the decay's logits
    const float* beta = nullptr;     // [n_tokens][n_v_heads] the rate's logits
    const float* dt_bias = nullptr;  // [n_v_heads]
    const float* a = nullptr;        // [n_v_heads] -exp(A_log)
    float* state = nullptr;          // [n_v_heads][head_v][head_k], advanced by the tokens
    float* out = nullptr;            // [n_tokens][value_width]
    int n_tokens = 0;
    DeltaNetShape shape;
  };
  virtual void deltaRule(const DeltaRuleCall& call);
  // y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight * silu(gate[r])   x, gate, y: [n_rows][dim]
  // (y may be x); weight: [dim].
  virtual void gatedRmsNorm(const float* x, const float* weight, const float* gate, float* y, int n_rows,
                            int dim, float eps);
  // x[i] *= sigmoid(gate[i])   (the gated attention's output gate)
  virtual void sigmoidGate(float* x, const float* gate, size_t n);

  // gemma4's ops. Defaults throw std::invalid_argument.
  // out[i] = gelu(gate[i]) * up[i], gelu in its tanh form (ggml_gelu, HF gelu_pytorch_tanh):
  // 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3)))
  virtual void geglu(const float* gate, const float* up, float* out, size_t n);
  // x[i] *= s
  virtual void scale(float* x, float s, size_t n);
  // x[i] = cap * tanh(x[i] / cap)   (the final logit soft-cap)
  virtual void softcap(float* x, float cap, size_t n);
  // rope whose pair i turns by positions[t] * base^(-2i/n_rot) / factors[i] (ggml's
  // rope_ext with freq_factors; gemma4's global layers: factor 1e30 leaves a pair
  // still). factors: [n_rot / 2] in host memory.
  virtual void ropeFactors(float* x, int n_tokens, int n_heads, int head_dim, int n_rot,
                           const int32_t* positions, float freq_base, RopeStyle style, const float* factors);
  // routeTopK's weights in `routing` times scales[id] (backend memory, [n_expert]):
  // gemma4's expert output scales on a backend that computes the MoE block.
  virtual void scaleRoutingWeights(float* routing, int n_tokens, int k, const float* scales);

  // The routed experts of a MoE layer computed where the activations live, in a
  // few launches per layer (a device backend). Without it (the CPU backend) the
  // forward pass routes on the host and computes expert by expert with matmul.
  virtual bool computesMoe() const { return false; }
  // Top-k routing of logits [n_tokens][rule.n_expert]: routing (backend memory,
  // 2 * n_tokens * rule.k floats) gets the ids (int32 bits) [n_tokens][k] then the
  // weights [n_tokens][k]; host_ids and host_weights get copies when the call returns.
  // Both null: nothing is copied back (the ids stay where moeExperts reads them).
  virtual void routeTopK(const float* logits, int n_tokens, const RoutingRule& rule, float* routing,
                         int32_t* host_ids, float* host_weights);
  struct MoeExpertsCall {
    const float* x = nullptr;           // [n_tokens][n_embd] the layer's FFN input
    const float* routing = nullptr;     // routeTopK's output for these tokens
    const int32_t* host_ids = nullptr;  // its host copy of the ids, [n_tokens][k]
    int n_tokens = 0, k = 0, n_embd = 0, n_ff = 0;
    std::span<const ExpertRef* const> experts;  // computed in this order
    // Instead of `experts` and `host_ids`: every expert of layer `layer`, indexed by
    // id, in backend memory; the backend computes the ones `routing` names, reading
    // the ids where they are (the host needs no copy of them).
    std::span<const ExpertWeights> layer_experts;
    int layer = -1;
    float* h = nullptr;        // [n_tokens * k][n_ff] scratch
    float* outputs = nullptr;  // [n_tokens * k][n_embd]: row t * k + j gets
                               // the output of token t's rank-j expert
    // gpt-oss: per expert a bias row added to its gate, up and down products
    // ([n_expert][n_ff], [n_expert][n_ff], [n_expert][n_embd] in backend memory), or
    // null; and the clamped SwiGLU (swigluClamped) in place of the plain one.
    const float* gate_bias = nullptr;
    const float* up_bias = nullptr;
    const float* down_bias = nullptr;
    bool clamped_swiglu = false;
    float swiglu_alpha = 0.0f, swiglu_limit = 0.0f;
    bool gelu = false;  // gemma4: gelu(gate) * up (Backend::geglu) in place of the SwiGLU
  };
  // Fills the output rows of every (token, rank) routed to one of call.experts;
  // other rows are left as they are. A row's value does not depend on which
  // experts share the call or their order.
  virtual void moeExperts(const MoeExpertsCall& call);
  // out[t] = sum over j = 0..k-1, in that order, of weight[t][j] * outputs[t * k + j]
  virtual void moeCombine(const float* outputs, const float* routing, int n_tokens, int k, int n_embd,
                          float* out);

  // What the matmul kernels read so far, counted from their launches' arguments:
  // bytes_read counts each weight byte once per pass over its rows (a device
  // kernel makes one pass per 8 tokens) and each activation row once per launch;
  // weight_bytes counts the weights the matmuls used, once per call. Zero where
  // the backend does not count (the CPU backend).
  struct MatmulTraffic {
    uint64_t weight_bytes = 0;
    uint64_t bytes_read = 0;
  };
  virtual MatmulTraffic matmulTraffic() const { return {}; }

  // Sampling on the backend: the best r.k entries of a logits row ([n_vocab], backend
  // memory) after the sampler's first steps (LogitsReduction), queued like any op;
  // readLogitCandidates waits for the last reduction's entries and writes them to out
  // ([r.k]), so only those cross to the host. maxLogitCandidates: the largest k this
  // backend reduces; 0 (the default: the CPU, whose row is host memory already): none,
  // and the other two throw std::logic_error.
  virtual int maxLogitCandidates() const { return 0; }
  virtual void reduceLogits(const float* logits, int n_vocab, const LogitsReduction& r);
  virtual void readLogitCandidates(std::span<LogitCandidate> out);
  // The same entries without waiting: queueLogitCandidates(slot) queues their copy to
  // the host into slot 0 or 1 (the host reads one step's entries while the next step
  // runs); takeLogitCandidates(slot, out) waits for that slot's last copy only, and
  // returns the token that reduction chose on the device (embedsChosenToken): the
  // argmax (k = 1) or the drawn one (LogitsReduction::draw); -1 for none.
  virtual void queueLogitCandidates(int slot);
  virtual int32_t takeLogitCandidates(int slot, std::span<LogitCandidate> out);

  // A decode step's own values: the token it embeds and its position (the KV row it
  // writes, the keys it attends to, its rotation); `owner` names the sequence (a
  // Transformer) whose buffers the step reads and writes; `reduce`, where the step ends
  // with reduceLogits of its logits, that reduction (its penalised tokens are the
  // step's values too).
  struct StepValues {
    int32_t token = 0;
    int32_t pos = 0;
    uint64_t owner = 0;
    const LogitsReduction* reduce = nullptr;
    // The token is the one the last greedy reduction (k = 1) or draw chose, where the
    // device left it (embedsChosenToken); `token` is not read. Such a step is queued
    // before the host has read that token, so the device goes on without waiting for it.
    bool token_chosen_on_device = false;
  };
  // Whether a recorded or replayed step may embed the token the last greedy reduction
  // or draw chose on the device (StepValues::token_chosen_on_device), and reduceLogits
  // draws (LogitsReduction::draw).
  virtual bool embedsChosenToken() const { return false; }
  // A decode step recorded once and replayed as one graph (a device backend: one
  // launch per step instead of one per op). beginStepCapture(v) returns false where the
  // backend does not record: the ops then run as they are called. Between it and
  // endStepCapture(), which runs what was recorded, the ops whose arguments depend on
  // v's token and position (embed, rope, storeKv, attention) must be given exactly
  // those (one token at v.pos), and reduceLogits, if the step ends with it, exactly
  // *v.reduce: the recording reads them from device memory instead, so replayStep can
  // run it again at later positions (with v.reduce's penalised tokens; the same k). No op may wait for the
  // device; one that would (or a recording that fails) throws StepCaptureFailed, after which nothing recorded
  // has run: the caller calls abortStepCapture() and runs the step again without recording. Any other
  // exception: abortStepCapture() too.
  virtual bool beginStepCapture(const StepValues& v) {
    (void)v;
    return false;
  }
  virtual void endStepCapture() {}
  virtual void abortStepCapture() noexcept {}
  // Runs the recorded step again with v's token and position, with nothing recorded
  // anew: true when it could (the same owner, no buffer of the backend replaced since,
  // v.pos within the positions the recording serves); false: record the step again.
  virtual bool replayStep(const StepValues& v) {
    (void)v;
    return false;
  }

  // Host <-> backend transfers (same memory for the CPU backend).
  virtual void toHost(float* host_dst, const float* src, size_t n) = 0;
  // Like toHost, without waiting: the values are in host_dst once the next wait for
  // the device returns (synchronize, or a toHost); host_dst must stay valid until
  // then. Default: at once.
  virtual void toHostLater(float* host_dst, const float* src, size_t n) { toHost(host_dst, src, n); }
  virtual void fromHost(float* dst, const float* host_src, size_t n) = 0;
  // Waits until all queued work is done (no-op for the CPU backend).
  virtual void synchronize() = 0;
};

// The defaults stay inline: the CUDA library carries Backend's vtable without
// linking the engine.
inline void Backend::storeKv(const KvCache& dst, size_t first, const float* src, size_t n) {
  if (dst.type != KvType::F32)
    throw std::invalid_argument(name() + ": storeKv: this backend stores only F32 KV caches");
  if (first > dst.n_elems || n > dst.n_elems - first)
    throw std::out_of_range(name() + ": storeKv: elements " + std::to_string(first) + " + " +
                            std::to_string(n) + " past a cache of " + std::to_string(dst.n_elems));
  copy(static_cast<float*>(dst.data) + first, src, n);
}

inline void Backend::sigmoidGatedAdd(float* y, const float* x, const float* gate_logits, int n_rows,
                                     int width) {
  std::vector<float> gates(static_cast<size_t>(n_rows));
  toHost(gates.data(), gate_logits, gates.size());
  for (int t = 0; t < n_rows; ++t) {
    const float gate = 1.0f / (1.0f + std::exp(-gates[t]));
    axpy(y + size_t(t) * width, x + size_t(t) * width, gate, width);
  }
}

inline void Backend::ropeYarn(float*, int, int, int, int, const int32_t*, float, RopeStyle, const RopeYarn&) {
  throw std::invalid_argument(name() + ": YaRN RoPE scaling is not implemented on this backend yet");
}

inline void Backend::swigluClamped(const float*, const float*, float*, size_t, float, float) {
  throw std::invalid_argument(name() + ": the clamped SwiGLU is not implemented on this backend yet");
}

inline void Backend::convSilu(const float*, const float*, float*, float*, int, int, int) {
  throw std::invalid_argument(name() + ": the delta-net conv is not implemented on this backend");
}

inline void Backend::l2NormHeads(float*, int, size_t, int, int, float, float) {
  throw std::invalid_argument(name() + ": the per-head L2 norm is not implemented on this backend");
}

inline void Backend::deltaRule(const DeltaRuleCall&) {
  throw std::invalid_argument(name() + ": the gated delta rule is not implemented on this backend");
}

inline void Backend::gatedRmsNorm(const float*, const float*, const float*, float*, int, int, float) {
  throw std::invalid_argument(name() + ": the gated RMS norm is not implemented on this backend");
}

inline void Backend::sigmoidGate(float*, const float*, size_t) {
  throw std::invalid_argument(name() + ": the sigmoid output gate is not implemented on this backend");
}

inline void Backend::geglu(const float*, const float*, float*, size_t) {
  throw std::invalid_argument(name() +
                              ": the GELU-gated FFN (gemma4) is not implemented on this backend yet");
}

inline void Backend::scale(float*, float, size_t) {
  throw std::invalid_argument(name() + ": scale (gemma4) is not implemented on this backend yet");
}

inline void Backend::softcap(float*, float, size_t) {
  throw std::invalid_argument(name() +
                              ": the logit soft-cap (gemma4) is not implemented on this backend yet");
}

inline void Backend::ropeFactors(float*, int, int, int, int, const int32_t*, float, RopeStyle, const float*) {
  throw std::invalid_argument(
      name() + ": rope with frequency factors (gemma4) is not implemented on this backend yet");
}

inline void Backend::scaleRoutingWeights(float*, int, int, const float*) {
  throw std::invalid_argument(name() +
                              ": scaling routing weights (gemma4) is not implemented on this backend");
}

inline void Backend::reduceLogits(const float*, int, const LogitsReduction&) {
  throw std::logic_error(name() + ": reduceLogits needs a backend that reduces logits (maxLogitCandidates)");
}

inline void Backend::readLogitCandidates(std::span<LogitCandidate>) {
  throw std::logic_error(name() + ": readLogitCandidates needs a backend that reduces logits");
}

inline void Backend::queueLogitCandidates(int) {
  throw std::logic_error(name() + ": queueLogitCandidates needs a backend that reduces logits");
}

inline int32_t Backend::takeLogitCandidates(int, std::span<LogitCandidate>) {
  throw std::logic_error(name() + ": takeLogitCandidates needs a backend that reduces logits");
}

inline void Backend::routeTopK(const float*, int, const RoutingRule&, float*, int32_t*, float*) {
  throw std::logic_error(name() + ": routeTopK needs a backend that computes the MoE block (computesMoe)");
}

inline void Backend::moeExperts(const MoeExpertsCall&) {
  throw std::logic_error(name() + ": moeExperts needs a backend that computes the MoE block (computesMoe)");
}

inline void Backend::moeCombine(const float*, const float*, int, int, int, float*) {
  throw std::logic_error(name() + ": moeCombine needs a backend that computes the MoE block (computesMoe)");
}

// threads <= 0: one per physical core (physicalCores() in inference/cpu/thread_pool.h).
std::unique_ptr<Backend> makeCpuBackend(int threads = 0);

}  // namespace moe
