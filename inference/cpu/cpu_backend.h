// The CPU compute backend: host memory, ops on float activations, weights in their
// file type. Quantised weights (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) meet activations
// quantised once per matmul to 8-bit blocks, in integer dot products
// (quant/quant_dot.h); F32/F16/BF16 weights are dotted in float (quant::dotRow).
// prepareWeight repacks Q8_0, Q4_0 and Q4_K/Q5_K/Q6_K weights into interleaved row
// groups (quant/quant_repack.h: one vector lane per row, the same bits); other
// weights, and any view it was not given, are used in place (a batch of 16 or more
// tokens still meets those types in groups: each work item repacks its rows into a
// thread's scratch). Work is spread over a small
// persistent thread pool where the op is large enough to pay for the hand-off;
// small ops run inline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>

#include "inference/backend.h"
#include "inference/cpu/thread_pool.h"
#include "quant/quant_dot.h"

namespace moe {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads = 0);  // threads <= 0: physicalCores()
  ~CpuBackend() override;

  std::string name() const override;
  Device device() const override { return Device::kCpu; }
  int threads() const { return pool_.threads(); }
  // The instruction set of the integer dot kernels: the best the CPU has, unless a
  // test or the bench picks another (every choice gives the same bits).
  quant::DotIsa dotIsa() const { return isa_; }
  void setDotIsa(quant::DotIsa isa);
  // Whether prepareWeight repacks, and batches repack their rows on the fly (on by
  // default; off keeps the file's layout everywhere, as an offload path's host copies
  // have it).
  void setRepackWeights(bool on) { repack_ = on; }
  // A weight is repacked only while the memory the kernel reports available
  // (MemAvailable) stays above this many bytes after its copy: a model near the
  // size of RAM keeps the file layout (the same bits, read from the page cache)
  // rather than pushing the machine into swap or the OOM killer.
  void setRepackReserve(uint64_t bytes) { repack_reserve_ = bytes; }
  // Off: quantised weights meet float activations (quant::dotRow on the file
  // layout, no repacking), the arithmetic of the CUDA backend's kernels, so tests
  // can hold the two backends to float rounding. On by default.
  // Call it before any weight is prepared: repacked weights would not be read right
  // (std::logic_error).
  void setQuantisedActivations(bool on);

  // The element type of the KV caches allocKv makes from now on: F32 (the default)
  // or F16 (half the memory; storeKv rounds to nearest even, as the CUDA backend's
  // cache does, and attention reads the halves as the floats they are).
  void setKvType(KvType t) { kv_type_ = t; }

  float* allocFloats(size_t n) override;  // zero-filled, 64-byte aligned
  KvCache allocKv(size_t n_elems) override;
  void storeKv(const KvCache& dst, size_t first, const float* src, size_t n) override;
  void freeFloats(float* p) override;
  WeightView prepareWeight(const WeightView& host) override;
  void releaseWeight(const WeightView& prepared) override;

  void embed(const WeightView& table, const int32_t* tokens, int n_tokens, float* out) override;
  void matmul(const WeightView& w, const float* x, float* y, int n_tokens) override;
  // Quantised jobs share one activation quantisation per input and one parallel loop.
  void matmulMany(std::span<const MatmulJob> jobs) override;
  void rmsNorm(const float* x, const float* weight, float* y, int n_rows, int dim, float eps) override;
  void rope(float* x, int n_tokens, int n_heads, int head_dim, int n_rot, const int32_t* positions,
            float freq_base, RopeStyle style) override;
  void ropeYarn(float* x, int n_tokens, int n_heads, int head_dim, int n_rot, const int32_t* positions,
                float freq_base, RopeStyle style, const RopeYarn& yarn) override;
  // F32 or F16 caches (both of one type): std::invalid_argument for another.
  void attention(const float* q, const KvCache& k_cache, const KvCache& v_cache, int pos0, int n_tokens,
                 const AttentionShape& shape, float* out) override;
  void swiglu(const float* gate, const float* up, float* out, size_t n) override;
  void swigluClamped(const float* gate, const float* up, float* out, size_t n, float alpha,
                     float limit) override;
  void add(float* y, const float* x, size_t n) override;
  void axpy(float* y, const float* x, float a, size_t n) override;
  void copy(float* dst, const float* src, size_t n) override;
  void zero(float* y, size_t n) override;
  // qwen35moe (cpu_delta_net.cpp): deltanet::'s functions, channels and heads in parallel.
  void convSilu(const float* x, const float* weight, float* state, float* out, int n_tokens, int channels,
                int kernel) override;
  void l2NormHeads(float* x, int n_rows, size_t row_stride, int n_heads, int head_dim, float eps,
                   float scale) override;
  void deltaRule(const DeltaRuleCall& call) override;
  void gatedRmsNorm(const float* x, const float* weight, const float* gate, float* y, int n_rows, int dim,
                    float eps) override;
  void sigmoidGate(float* x, const float* gate, size_t n) override;
  void geglu(const float* gate, const float* up, float* out, size_t n) override;
  void scale(float* x, float s, size_t n) override;
  void softcap(float* x, float cap, size_t n) override;
  void ropeFactors(float* x, int n_tokens, int n_heads, int head_dim, int n_rot, const int32_t* positions,
                   float freq_base, RopeStyle style, const float* factors) override;
  void toHost(float* host_dst, const float* src, size_t n) override;
  void fromHost(float* dst, const float* host_src, size_t n) override;
  void synchronize() override {}

 private:
  // Runs fn over [0, n) items of `work_per_item` multiply-adds each, in parallel
  // only when the whole loop is big enough to pay for waking the pool.
  void forEach(int64_t n, int64_t work_per_item, const ThreadPool::RangeFn& fn);
  void matmulOneToken(const WeightView& w, const float* x, float* y);
  void matmulBatch(const WeightView& w, const float* x, float* y, int n_tokens);
  void matmulQuantized(std::span<const MatmulJob> jobs);  // every job's weight quantised

  ThreadPool pool_;
  quant::DotIsa isa_ = quant::bestDotIsa();
  bool repack_ = true;
  KvType kv_type_ = KvType::F32;
  bool quantised_activations_ = true;
  uint64_t repack_reserve_ = uint64_t{2} << 30;
  std::mutex alloc_mu_;
  std::unordered_set<float*> allocations_;
  std::unordered_set<const uint8_t*> repacked_;  // buffers prepareWeight made (alloc_mu_)
};

}  // namespace moe
