// The compute interface the forward pass is written against. Buffers are
// backend memory (host memory for the CPU backend, device memory for CUDA);
// shapes are given in comments as [outer][inner], inner contiguous.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "inference/device_error.h"
#include "inference/model_config.h"
#include "inference/weight.h"

namespace moe {

struct AttentionShape {
  int n_head = 0;
  int n_head_kv = 0;  // GQA: query head h reads kv head h / (n_head / n_head_kv)
  int head_dim = 0;
  float scale = 0.0f;  // usually 1/sqrt(head_dim)
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // Allocation of activations and the KV cache, zero-filled.
  virtual float* allocFloats(size_t n) = 0;
  // freeFloats and releaseWeight are called from destructors: a device error while
  // freeing (a GPU that has faulted) is not thrown; the memory goes either way.
  virtual void freeFloats(float* p) = 0;
  // Makes a weight usable by this backend: the CPU backend keeps the view as is or
  // repacks it into interleaved row groups, the CUDA backend uploads it. The view
  // stays valid until releaseWeight or the backend's end; `host` may go at once.
  virtual WeightView prepareWeight(const WeightView& host) = 0;
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
  // In place, x: [n_tokens][n_heads][head_dim]; the first n_rot dims of each head rotate
  // by positions[t] * base^(-2i/n_rot).
  virtual void rope(float* x, int n_tokens, int n_heads, int head_dim, int n_rot, const int32_t* positions,
                    float freq_base, RopeStyle style) = 0;
  // Causal attention of n_tokens queries at positions pos0.. over the cache rows 0..pos0+t.
  // q: [n_tokens][n_head][head_dim]; k_cache, v_cache: [n_ctx][n_head_kv][head_dim];
  // out: [n_tokens][n_head][head_dim]
  virtual void attention(const float* q, const float* k_cache, const float* v_cache, int pos0, int n_tokens,
                         const AttentionShape& shape, float* out) = 0;
  // out[i] = silu(gate[i]) * up[i]
  virtual void swiglu(const float* gate, const float* up, float* out, size_t n) = 0;
  // y[i] += x[i]
  virtual void add(float* y, const float* x, size_t n) = 0;
  // y[i] += a * x[i]
  virtual void axpy(float* y, const float* x, float a, size_t n) = 0;
  virtual void copy(float* dst, const float* src, size_t n) = 0;
  // y[i] = 0, queued like any kernel (no host round trip).
  virtual void zero(float* y, size_t n) = 0;
  // Host <-> backend transfers (same memory for the CPU backend).
  virtual void toHost(float* host_dst, const float* src, size_t n) = 0;
  virtual void fromHost(float* dst, const float* host_src, size_t n) = 0;
  // Waits until all queued work is done (no-op for the CPU backend).
  virtual void synchronize() = 0;
};

// threads <= 0: one per physical core (physicalCores() in inference/cpu/thread_pool.h).
std::unique_ptr<Backend> makeCpuBackend(int threads = 0);

}  // namespace moe
