#include "inference/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <stdexcept>

#include "inference/cuda/cuda_backend_internal.h"
#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/rope_angles.h"
#include "quant/quant.h"

namespace moe {

using gguf::TensorType;
using namespace cuda_backend;

CudaBackend::CudaBackend() {
  try {
    int device = 0;
    checkCuda(cudaGetDevice(&device), "cudaGetDevice");
    cudaDeviceProp prop{};
    checkCuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    device_name_ = prop.name;
    device_memory_ = prop.totalGlobalMem;
    int8_mma_ = prop.major * 10 + prop.minor >= cuda::kMinMmaComputeCapability;
    checkCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    checkCuda(cudaEventCreateWithFlags(&readback_done_, cudaEventDisableTiming), "cudaEventCreate");
    for (CandidateSlot& c : candidate_slots_)
      checkCuda(cudaEventCreateWithFlags(&c.done, cudaEventDisableTiming), "cudaEventCreate");
    for (UploadBuffer& b : uploads_)
      checkCuda(cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming), "cudaEventCreate");
    checkCublas(cublasCreate(&cublas_), "cublasCreate");
    checkCublas(cublasSetStream(cublas_, stream_), "cublasSetStream");
    // Plain FP32 GEMMs (no TF32 tensor-core rounding of the inputs).
    checkCublas(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    // A workspace of its own, so a recorded step's GEMMs never ask cuBLAS to allocate.
    cublas_workspace_ = cudaMallocOrThrow(kCublasWorkspaceBytes, "cuBLAS workspace");
    checkCublas(cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes), "cublasSetWorkspace");
    cuda::launchProbe(stream_);  // fails here, readably, when no kernel image fits this GPU
    synchronize();
  } catch (...) {
    release();
    throw;
  }
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::release() noexcept {
  abortStepCapture();
  if (stream_) cudaStreamSynchronize(stream_);
  if (step_graph_) cudaGraphExecDestroy(step_graph_), step_graph_ = nullptr;
  for (float* p : allocations_) cudaFree(p);
  allocations_.clear();
  selection_biases_.clear();  // their device copies were among allocations_
  for (auto& [dev, bytes] : weights_) cudaFree(dev);
  weights_.clear();
  for (Scratch* s : {&tokens_, &rope_cs_, &tile_, &act_, &moe_x_act_, &moe_plan_, &moe_h_act_, &attn_,
                     &layer_experts_, &step_dev_, &penalty_dev_, &top_keys_, &top_out_})
    if (s->ptr) cudaFree(s->ptr), s->ptr = nullptr;
  for (PositionRope& r : rope_all_)
    if (r.table.ptr) cudaFree(r.table.ptr), r.table.ptr = nullptr;
  rope_all_.clear();
  rope_all_rows_ = 0;
  if (pinned_) cudaFreeHost(pinned_), pinned_ = nullptr;
  if (later_) cudaFreeHost(later_), later_ = nullptr;
  if (readback_done_) cudaEventDestroy(readback_done_), readback_done_ = nullptr;
  for (CandidateSlot& c : candidate_slots_) {
    if (c.host) cudaFreeHost(c.host), c.host = nullptr;
    if (c.done) cudaEventDestroy(c.done), c.done = nullptr;
  }
  for (UploadBuffer& b : uploads_) {
    if (b.ptr) cudaFreeHost(b.ptr), b.ptr = nullptr;
    if (b.done) cudaEventDestroy(b.done), b.done = nullptr;
  }
  if (cublas_) cublasDestroy(cublas_), cublas_ = nullptr;
  if (cublas_workspace_) cudaFree(cublas_workspace_), cublas_workspace_ = nullptr;
  if (stream_) cudaStreamDestroy(stream_), stream_ = nullptr;
  cudaGetLastError();  // nothing here may leave an error for the next CUDA user
}

std::string CudaBackend::name() const {
  return "cuda (" + device_name_ + ", " + formatBytes(device_memory_) + ")";
}

void* CudaBackend::scratch(Scratch& s, size_t bytes, const char* what) {
  if (s.bytes >= bytes) return s.ptr;
  refuseWhileCapturing(what);
  synchronize();  // queued kernels may still read the old buffer
  if (s.ptr) checkCuda(cudaFree(s.ptr), "cudaFree (scratch)");
  s.ptr = nullptr;
  s.bytes = 0;
  s.ptr = cudaMallocOrThrow(bytes, what);
  s.bytes = bytes;
  ++buffers_generation_;  // a recorded step read the old buffer
  return s.ptr;
}

void CudaBackend::reserveScratch(const ModelConfig& c, int max_tokens, int n_ctx) {
  const int64_t T = std::max(1, max_tokens), K = std::max(1, c.n_expert_used);
  const int64_t widest_input = std::max<int64_t>({c.n_embd, c.qWidth(), c.n_ff, c.n_ff_exp, c.n_ff_shexp, 1});
  scratch(act_, cuda::quantizedActBytes(widest_input, static_cast<int>(T)), "quantised activations");
  scratch(tokens_, T * sizeof(int32_t), "token ids");
  scratch(rope_cs_, T * std::max(c.n_rot, 1) * sizeof(float), "rope table");
  if (c.n_expert > 0) {
    scratch(moe_x_act_, cuda::quantizedActBytes(c.n_embd, static_cast<int>(T)), "MoE activations");
    scratch(moe_h_act_, cuda::quantizedActBytes(c.n_ff_exp, static_cast<int>(T * K)),
            "MoE expert activations");
    scratch(moe_plan_, moePlanBytes(c.n_expert, static_cast<int>(T * K)), "MoE expert plan");
    if (c.n_expert <= cuda::kMaxRouteExperts) {
      scratch(layer_experts_, sizeof(uint8_t*) * 3 * size_t(c.n_layer) * size_t(c.n_expert),
              "MoE expert tables");
      layer_experts_host_.assign(3 * size_t(c.n_layer) * size_t(c.n_expert), nullptr);
      layer_experts_width_ = c.n_expert;
    }
  }
  if (T > kMatvecTokens) {  // the F16/BF16 weights' dequantisation tile, as large as the largest needs
    size_t tile = 0;
    {
      std::lock_guard lock(alloc_mu_);
      tile = float_tile_bytes_;
    }
    if (tile) scratch(tile_, tile, "matmul dequantisation tile");
  }
  n_ctx_ = std::max(n_ctx_, n_ctx);
  reserveStepValues();
  const size_t partials = cuda::attentionScratchBytesUpTo(n_ctx, c.n_head, c.n_head_kv, c.head_dim);
  if (partials) scratch(attn_, partials, "attention partials");
  // Sampling on the device: a context's distinct tokens, the largest k's keys.
  reservePenalty(size_t(std::min(n_ctx_, std::max(c.n_vocab, 1))));
  scratch(top_keys_, cuda::topLogitsScratchBytes(c.n_vocab, cuda::kMaxTopLogits), "top logits keys");
  scratch(top_out_, (cuda::kMaxTopLogits + 1) * sizeof(cuda::TopLogit), "top logits");  // and a drawn entry
  reserveCandidateSlots();
  // Read backs: the last token's logits, or a batch's routing.
  pinned(std::max<size_t>(size_t(c.n_vocab) * sizeof(float), 2 * T * K * sizeof(int32_t)));
  const size_t upload = std::max<size_t>(T * sizeof(int32_t), T * std::max(c.n_rot, 1) * sizeof(float));
  for (UploadBuffer& b : std::span(uploads_, kUploadRingSized))
    if (b.bytes < upload) {
      synchronize();
      if (b.ptr) cudaFreeHost(b.ptr);
      b.ptr = nullptr;
      b.bytes = 0;
      b.pending = false;
      b.ptr = cudaHostAllocOrThrow(upload, "pinned upload buffer");
      b.bytes = upload;
    }
  // The rest at their least, pinned now: every decode step copies its values through
  // the ring, and pinning memory mid-decode would cost the step its time.
  for (UploadBuffer& b : std::span(uploads_ + kUploadRingSized, kUploadRing - kUploadRingSized))
    if (!b.ptr) {
      b.ptr = cudaHostAllocOrThrow(kUploadLeastBytes, "pinned upload buffer");
      b.bytes = kUploadLeastBytes;
    }
}

void CudaBackend::synchronize() {
  refuseWhileCapturing("cuda backend: synchronize");
  checkCuda(cudaStreamSynchronize(stream_), "cuda backend: synchronize");
  flushLater();
}

// After a wait that covered every queued copy: the later read backs are done.
void CudaBackend::flushLater() {
  for (const LaterCopy& c : later_copies_)
    std::memcpy(c.host_dst, static_cast<const char*>(later_) + c.offset, c.bytes);
  later_copies_.clear();
  later_used_ = 0;
}

// ---------------------------------------------------------------------------
// Memory

float* CudaBackend::allocFloats(size_t n) {
  const size_t bytes = std::max<size_t>(1, n) * sizeof(float);
  auto* p = static_cast<float*>(cudaMallocOrThrow(bytes, "activation buffer"));
  const cudaError_t st = cudaMemsetAsync(p, 0, bytes, stream_);
  if (st != cudaSuccess) {
    cudaFree(p);
    checkCuda(st, "cudaMemsetAsync (allocFloats)");
  }
  std::lock_guard lock(alloc_mu_);
  allocations_.insert(p);
  return p;
}

void CudaBackend::freeFloats(float* p) {
  if (!p) return;
  {
    std::lock_guard lock(alloc_mu_);
    if (allocations_.erase(p) == 0)
      throw std::invalid_argument("cuda backend: freeFloats of a pointer it did not allocate");
  }
  freeAfterQueuedWork(p);
}

KvCache CudaBackend::allocKv(size_t n_elems) {  // [n_elems] halves
  return {allocFloats((n_elems + 1) / 2), KvType::F16, n_elems};
}

void CudaBackend::storeKv(const KvCache& dst, size_t first, const float* src, size_t n) {
  if (dst.type != KvType::F16)
    throw std::invalid_argument("cuda backend: storeKv: the KV cache must be F16 (allocKv)");
  if (first > dst.n_elems || n > dst.n_elems - first)
    throw std::out_of_range("cuda backend: storeKv: elements " + std::to_string(first) + " + " +
                            std::to_string(n) + " past a cache of " + std::to_string(dst.n_elems));
  if (n == 0) return;
  if (capturing_) {  // one row at the step's position, read on the device
    const int32_t* row = recordedPosition(int(first / n), first % n == 0 ? 1 : 0, "storeKv");
    cuda::launchStoreHalf(src, static_cast<__half*>(dst.data), nullptr, nullptr, n, stream_, row, n);
    return;
  }
  cuda::launchStoreHalf(src, static_cast<__half*>(dst.data) + first, nullptr, nullptr, n, stream_);
}

void CudaBackend::storeKvPair(const KvCache& k_dst, const KvCache& v_dst, size_t first, const float* k_src,
                              const float* v_src, size_t n) {
  for (const KvCache* dst : {&k_dst, &v_dst}) {
    if (dst->type != KvType::F16)
      throw std::invalid_argument("cuda backend: storeKv: the KV cache must be F16 (allocKv)");
    if (first > dst->n_elems || n > dst->n_elems - first)
      throw std::out_of_range("cuda backend: storeKv: elements " + std::to_string(first) + " + " +
                              std::to_string(n) + " past a cache of " + std::to_string(dst->n_elems));
  }
  if (n == 0) return;
  if (capturing_) {  // one row at the step's position, read on the device
    const int32_t* row = recordedPosition(int(first / n), first % n == 0 ? 1 : 0, "storeKvPair");
    cuda::launchStoreHalf(k_src, static_cast<__half*>(k_dst.data), v_src, static_cast<__half*>(v_dst.data), n,
                          stream_, row, n);
    return;
  }
  cuda::launchStoreHalf(k_src, static_cast<__half*>(k_dst.data) + first, v_src,
                        static_cast<__half*>(v_dst.data) + first, n, stream_);
}

// Queued kernels may still read p: wait for them, then free. After a device fault
// both calls fail; the memory is gone with the context, and the fault has been
// (or will be) reported by the op that met it, so nothing is thrown here.
void CudaBackend::freeAfterQueuedWork(void* p) noexcept {
  cudaStreamSynchronize(stream_);
  cudaFree(p);
  cudaGetLastError();
}

// No de-duplication by host address: host memory is reused after a model is
// freed, and a cache keyed by it would hand out a stale copy.
WeightView CudaBackend::prepareWeight(const WeightView& host) {
  if (host.empty()) return host;
  WeightView dev = host;
  const size_t bytes = host.bytes();
  auto* p = static_cast<uint8_t*>(cudaMallocOrThrow(bytes, "model weights"));
  const cudaError_t st = cudaMemcpyAsync(p, host.data, bytes, cudaMemcpyHostToDevice, stream_);
  const cudaError_t sync = st == cudaSuccess ? cudaStreamSynchronize(stream_) : st;
  if (sync != cudaSuccess) {
    cudaFree(p);
    checkCuda(sync, "upload of a weight");
  }
  std::lock_guard lock(alloc_mu_);
  weights_.emplace(p, bytes);
  weight_bytes_ += bytes;
  if (host.type == TensorType::F16 || host.type == TensorType::BF16)
    float_tile_bytes_ = std::max(float_tile_bytes_, tileBytes(host));
  dev.data = p;
  return dev;
}

void CudaBackend::releaseWeight(const WeightView& dev) {
  if (dev.empty()) return;
  std::lock_guard lock(alloc_mu_);
  auto it = weights_.find(const_cast<uint8_t*>(dev.data));
  if (it == weights_.end())
    throw std::invalid_argument("cuda backend: releaseWeight of a weight it did not prepare");
  weight_bytes_ -= it->second;
  device_readable_.erase(it->first);
  freeAfterQueuedWork(it->first);
  weights_.erase(it);
}

void CudaBackend::copy(float* dst, const float* src, size_t n) {  // [n], device to device
  if (n == 0 || dst == src) return;
  if (dst < src + n && src < dst + n) throw std::invalid_argument("cuda backend: copy of overlapping ranges");
  checkCuda(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
            "cuda backend: copy");
}

void CudaBackend::copyRows(float* dst, size_t dst_stride, const float* src, size_t src_stride, size_t width,
                           size_t n_rows) {
  if (width == 0 || n_rows == 0) return;
  if (n_rows == 1) return copy(dst, src, width);
  cuda::launchCopyRows(dst, dst_stride, src, src_stride, width, n_rows, stream_);
}

void CudaBackend::zero(float* y, size_t n) {  // 0.0f is all zero bytes
  if (n) checkCuda(cudaMemsetAsync(y, 0, n * sizeof(float), stream_), "cuda backend: zero");
}

void* CudaBackend::pinned(size_t bytes) {
  if (pinned_bytes_ >= bytes) return pinned_;
  synchronize();  // a queued copy may still write the old buffer
  if (pinned_) cudaFreeHost(pinned_);
  pinned_ = nullptr;
  pinned_bytes_ = 0;
  pinned_ = cudaHostAllocOrThrow(std::max<size_t>(bytes, 64 * 1024), "pinned read-back buffer");
  pinned_bytes_ = std::max<size_t>(bytes, 64 * 1024);
  return pinned_;
}

void CudaBackend::readBack(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  refuseWhileCapturing("cuda backend: read back");
  void* staging = pinned(bytes);
  checkCuda(cudaMemcpyAsync(staging, src, bytes, cudaMemcpyDeviceToHost, stream_), "cuda backend: read back");
  checkCuda(cudaEventRecord(readback_done_, stream_), "cuda backend: read back: cudaEventRecord");
  checkCuda(cudaEventSynchronize(readback_done_), "cuda backend: read back: wait");
  std::memcpy(host_dst, staging, bytes);
  flushLater();  // queued before this one: done too
}

void CudaBackend::toHostLater(float* host_dst, const float* src, size_t n) {
  if (n == 0) return;
  refuseWhileCapturing("cuda backend: read back later");
  const size_t bytes = n * sizeof(float);
  if (later_used_ + bytes > later_bytes_) {
    if (later_used_ > 0) synchronize();  // the queued copies land first (and are handed over)
    if (bytes > later_bytes_) {
      if (later_) cudaFreeHost(later_);
      later_ = nullptr;
      later_bytes_ = 0;
      later_ = cudaHostAllocOrThrow(std::max<size_t>(bytes, 64 * 1024), "pinned read-back buffer");
      later_bytes_ = std::max<size_t>(bytes, 64 * 1024);
    }
  }
  checkCuda(
      cudaMemcpyAsync(static_cast<char*>(later_) + later_used_, src, bytes, cudaMemcpyDeviceToHost, stream_),
      "cuda backend: read back later");
  later_copies_.push_back({host_dst, later_used_, bytes});
  later_used_ += bytes;
}

void CudaBackend::toHost(float* host_dst, const float* src, size_t n) {
  readBack(host_dst, src, n * sizeof(float));
}

void CudaBackend::fromHost(float* dst, const float* host_src, size_t n) {
  if (n == 0) return;
  upload(dst, host_src, n * sizeof(float), "cuda backend: fromHost");
}

// The caller may reuse `src` as soon as this returns, and an async copy reads its
// source only when the stream reaches it: the bytes go through one of kUploadRing
// pinned buffers, and a buffer is refilled only once its last copy has run (an
// event, in practice long done: the ring turns over once per several uploads).
void CudaBackend::upload(void* dst, const void* src, size_t bytes, const char* what) {
  if (bytes == 0) return;
  // A recorded step replays later, when the pinned buffer holds other bytes: it may
  // not upload. A one-time upload (an expert table, a bias) happens when the step runs
  // op by op instead, and the next step records; one that recurs stops the recording.
  if (capturing_) {
    if (++upload_refusals_ > 2) graphs_failed_ = true;
    throw StepCaptureFailed(std::string("a recorded step cannot upload: ") + what, graphs_failed_);
  }
  UploadBuffer& b = uploads_[next_upload_];
  next_upload_ = (next_upload_ + 1) % kUploadRing;
  if (b.pending && cudaEventQuery(b.done) != cudaSuccess) {
    refuseWhileCapturing(what);
    checkCuda(cudaEventSynchronize(b.done), what);
  }
  b.pending = false;
  if (b.bytes < bytes) {
    refuseWhileCapturing(what);
    if (b.ptr) cudaFreeHost(b.ptr);
    b.ptr = nullptr;
    b.bytes = 0;
    b.ptr = cudaHostAllocOrThrow(std::max(bytes, kUploadLeastBytes), "pinned upload buffer");
    b.bytes = std::max(bytes, kUploadLeastBytes);
  }
  std::memcpy(b.ptr, src, bytes);
  checkCuda(cudaMemcpyAsync(dst, b.ptr, bytes, cudaMemcpyHostToDevice, stream_), what);
  checkCuda(cudaEventRecord(b.done, stream_), what);
  b.pending = true;
}

// ---------------------------------------------------------------------------
// Activations

void CudaBackend::rmsNorm(const float* x, const float* weight, float* y, int n_rows, int dim, float eps) {
  cuda::launchRmsNorm(x, weight, y, n_rows, dim, eps, stream_);
}

void CudaBackend::addRmsNorm(float* x, const float* delta, const float* weight, float* y, int n_rows, int dim,
                             float eps) {
  cuda::launchAddRmsNorm(x, delta, weight, y, n_rows, dim, eps, stream_);
}

// cos/sin of every (token, pair) as the CPU backend's rope computes them
// (ropeAngles), uploaded once per distinct positions vector and rope parameters
// (q and k of every layer of a step share it).
const float* CudaBackend::ropeTable(const int32_t* positions, int n_tokens, int n_rot, float freq_base,
                                    const RopeYarn* yarn, const int32_t** first_row) {
  const size_t n = static_cast<size_t>(n_tokens) * n_rot;
  const RopeYarn key = yarn ? *yarn : RopeYarn{};
  *first_row = nullptr;
  if (capturing_) {
    *first_row = recordedPosition(positions[0], n_tokens, "rope");
    return recordedRope(n_rot, freq_base, yarn, nullptr);
  }
  const bool same =
      rope_n_rot_ == n_rot && rope_base_ == freq_base && rope_yarn_ == bool(yarn) &&
      (!yarn || (key.factor == rope_yarn_key_.factor && key.orig_ctx == rope_yarn_key_.orig_ctx &&
                 key.beta_fast == rope_yarn_key_.beta_fast && key.beta_slow == rope_yarn_key_.beta_slow &&
                 key.attn_factor == rope_yarn_key_.attn_factor)) &&
      rope_positions_.size() == size_t(n_tokens) &&
      std::equal(positions, positions + n_tokens, rope_positions_.begin());
  if (same && rope_cs_.bytes >= n * sizeof(float)) return static_cast<const float*>(rope_cs_.ptr);
  rope_host_.resize(n);
  for (int t = 0; t < n_tokens; ++t)
    ropeAngles(positions[t], n_rot, freq_base, yarn, rope_host_.data() + size_t(t) * n_rot);
  auto* dev = static_cast<float*>(scratch(rope_cs_, n * sizeof(float), "rope table"));
  // Invalidate before the copy: if it throws, the cache must not claim the new key.
  rope_positions_.clear();
  upload(dev, rope_host_.data(), n * sizeof(float), "cuda backend: rope table upload");
  rope_positions_.assign(positions, positions + n_tokens);
  rope_n_rot_ = n_rot;
  rope_base_ = freq_base;
  rope_yarn_ = bool(yarn);
  rope_yarn_key_ = key;
  return dev;
}

void CudaBackend::rope(float* x, int n_tokens, int n_heads, int head_dim, int n_rot, const int32_t* positions,
                       float freq_base, RopeStyle style) {  // x: [n_tokens][n_heads][head_dim]
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim)
    throw std::invalid_argument("cuda backend: rope: n_rot " + std::to_string(n_rot) +
                                " must be even and in (0, head_dim = " + std::to_string(head_dim) + "]");
  if (n_tokens <= 0 || n_heads <= 0) return;
  const int32_t* row = nullptr;
  const float* cs = ropeTable(positions, n_tokens, n_rot, freq_base, nullptr, &row);
  cuda::launchRope(x, n_heads, nullptr, 0, n_tokens, head_dim, n_rot, cs, style == RopeStyle::Neox, stream_,
                   row);
}

void CudaBackend::ropeYarn(float* x, int n_tokens, int n_heads, int head_dim, int n_rot,
                           const int32_t* positions, float freq_base, RopeStyle style, const RopeYarn& yarn) {
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim)
    throw std::invalid_argument("cuda backend: rope: n_rot " + std::to_string(n_rot) +
                                " must be even and in (0, head_dim = " + std::to_string(head_dim) + "]");
  if (!yarnValid(yarn))
    throw std::invalid_argument(
        "cuda backend: rope: YaRN needs factor >= 1, an original context and betas > 0");
  if (n_tokens <= 0 || n_heads <= 0) return;
  const int32_t* row = nullptr;
  const float* cs = ropeTable(positions, n_tokens, n_rot, freq_base, &yarn, &row);
  cuda::launchRope(x, n_heads, nullptr, 0, n_tokens, head_dim, n_rot, cs, style == RopeStyle::Neox, stream_,
                   row);
}

void CudaBackend::ropeFactors(float* x, int n_tokens, int n_heads, int head_dim, int n_rot,
                              const int32_t* positions, float freq_base, RopeStyle style,
                              const float* factors) {
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim)
    throw std::invalid_argument("cuda backend: rope: n_rot " + std::to_string(n_rot) +
                                " must be even and in (0, head_dim = " + std::to_string(head_dim) + "]");
  if (n_tokens <= 0 || n_heads <= 0) return;
  if (capturing_) {  // the table of every position, at the step's row
    const int32_t* row = recordedPosition(positions[0], n_tokens, "rope");
    cuda::launchRope(x, n_heads, nullptr, 0, n_tokens, head_dim, n_rot,
                     recordedRope(n_rot, freq_base, nullptr, factors), style == RopeStyle::Neox, stream_,
                     row);
    return;
  }
  const size_t n = static_cast<size_t>(n_tokens) * n_rot;
  rope_factors_host_.resize(n);
  for (int t = 0; t < n_tokens; ++t)
    ropeAnglesWithFactors(positions[t], n_rot, freq_base, factors,
                          rope_factors_host_.data() + size_t(t) * n_rot);
  auto* dev = static_cast<float*>(scratch(rope_factors_cs_, n * sizeof(float), "rope table (factors)"));
  upload(dev, rope_factors_host_.data(), n * sizeof(float), "cuda backend: rope table (factors) upload");
  cuda::launchRope(x, n_heads, nullptr, 0, n_tokens, head_dim, n_rot, dev, style == RopeStyle::Neox, stream_,
                   nullptr);
}

void CudaBackend::geglu(const float* gate, const float* up, float* out, size_t n) {
  cuda::Activation act;
  act.gelu = true;
  cuda::launchSwiglu(gate, up, out, n, act, stream_);
}

void CudaBackend::scale(float* x, float s, size_t n) { cuda::launchScale(x, s, n, stream_); }

void CudaBackend::softcap(float* x, float cap, size_t n) { cuda::launchSoftcap(x, cap, n, stream_); }

void CudaBackend::scaleRoutingWeights(float* routing, int n_tokens, int k, const float* scales) {
  cuda::launchScaleRouting(routing, size_t(n_tokens) * size_t(k), scales, stream_);
}

void CudaBackend::ropePair(float* q, int n_head, float* k, int n_head_kv, int n_tokens, int head_dim,
                           int n_rot, const int32_t* positions, float freq_base, RopeStyle style) {
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim)
    throw std::invalid_argument("cuda backend: rope: n_rot " + std::to_string(n_rot) +
                                " must be even and in (0, head_dim = " + std::to_string(head_dim) + "]");
  if (n_tokens <= 0 || n_head <= 0 || n_head_kv <= 0) return;
  const int32_t* row = nullptr;
  const float* cs = ropeTable(positions, n_tokens, n_rot, freq_base, nullptr, &row);
  cuda::launchRope(q, n_head, k, n_head_kv, n_tokens, head_dim, n_rot, cs, style == RopeStyle::Neox, stream_,
                   row);
}

void CudaBackend::attention(const float* q, const KvCache& k_cache, const KvCache& v_cache, int pos0,
                            int n_tokens, const AttentionShape& shape, float* out) {
  const int n_head = shape.n_head, n_head_kv = shape.n_head_kv, hd = shape.head_dim;
  if (n_head <= 0 || n_head_kv <= 0 || hd <= 0 || n_head % n_head_kv != 0 || pos0 < 0 || shape.window < 0)
    throw std::invalid_argument("cuda backend: attention: bad shape n_head " + std::to_string(n_head) +
                                ", n_head_kv " + std::to_string(n_head_kv) + ", head_dim " +
                                std::to_string(hd) + ", window " + std::to_string(shape.window));
  if (hd > cuda::kMaxHeadDim)
    throw std::invalid_argument("cuda backend: attention: head_dim " + std::to_string(hd) +
                                " above the supported " + std::to_string(cuda::kMaxHeadDim));
  if (k_cache.type != KvType::F16 || v_cache.type != KvType::F16)
    throw std::invalid_argument("cuda backend: attention: the KV cache must be F16 (allocKv)");
  if (!kvHoldsRows(k_cache, pos0, n_tokens, shape) || !kvHoldsRows(v_cache, pos0, n_tokens, shape))
    throw std::out_of_range("cuda backend: attention: rows up to " + std::to_string(pos0 + n_tokens) +
                            " past the KV cache");
  // A decode is planned for its keys rounded up (planKeys), recorded or not, so a
  // recorded step serves the positions up to there and gives the same bits.
  cuda::DevicePosition at;
  int plan_pos0 = pos0;
  if (n_tokens <= cuda::kDecodeMaxTokens) {
    at.plan_keys = capturing_ ? step_plan_keys_ : planKeys(pos0, n_tokens);
    plan_pos0 = at.plan_keys - n_tokens;
    if (capturing_) at.pos0 = recordedPosition(pos0, n_tokens, "attention");
  }
  const size_t scratch_bytes = cuda::attentionScratchBytes(plan_pos0, n_tokens, n_head, n_head_kv, hd);
  auto* partials =
      scratch_bytes ? static_cast<float*>(scratch(attn_, scratch_bytes, "attention partials")) : nullptr;
  cuda::launchAttention(q, static_cast<const __half*>(k_cache.data), static_cast<const __half*>(v_cache.data),
                        pos0, n_tokens, n_head, n_head_kv, hd, shape.scale, shape.sinks, shape.window, out,
                        partials, scratch_bytes, stream_, at);
}

void CudaBackend::swiglu(const float* gate, const float* up, float* out, size_t n) {
  cuda::launchSwiglu(gate, up, out, n, cuda::Activation{}, stream_);
}

void CudaBackend::swigluClamped(const float* gate, const float* up, float* out, size_t n, float alpha,
                                float limit) {
  cuda::launchSwiglu(gate, up, out, n, cuda::Activation{true, alpha, limit}, stream_);
}

void CudaBackend::add(float* y, const float* x, size_t n) { cuda::launchAdd(y, x, n, stream_); }

void CudaBackend::axpy(float* y, const float* x, float a, size_t n) { cuda::launchAxpy(y, x, a, n, stream_); }

bool CudaBackend::deviceMemory(uint64_t& used, uint64_t& total) {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  used = total_b - free_b;
  total = total_b;
  return true;
}

}  // namespace moe
