#include "inference/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "models/quant.h"

namespace moe {
namespace {

using gguf::TensorType;

// The batched matmul of a non-F32 weight dequantises at most this many floats
// (64 MiB) of rows at a time before cublasSgemm multiplies them.
constexpr int64_t kTileFloats = int64_t{1} << 24;
// Matmuls of more tokens than this take the GEMM: the int8 tensor-core one for
// quantised weights, a dequantised tile and cuBLAS for F16/BF16.
constexpr int kMatvecTokens = 8;

int64_t tileRows(const WeightView& w) {
  return std::clamp<int64_t>(kTileFloats / std::max<int64_t>(w.cols, 1), 1, w.rows);
}
size_t tileBytes(const WeightView& w) { return static_cast<size_t>(tileRows(w) * w.cols) * sizeof(float); }

cuda::ElemType elemType(TensorType t, const char* op) {
  switch (t) {
    case TensorType::F32: return cuda::ElemType::F32;
    case TensorType::F16: return cuda::ElemType::F16;
    case TensorType::BF16: return cuda::ElemType::BF16;
    case TensorType::Q8_0: return cuda::ElemType::Q8_0;
    case TensorType::Q4_0: return cuda::ElemType::Q4_0;
    case TensorType::Q4_K: return cuda::ElemType::Q4_K;
    case TensorType::Q5_K: return cuda::ElemType::Q5_K;
    case TensorType::Q6_K: return cuda::ElemType::Q6_K;
    default:
      throw std::invalid_argument(std::string("cuda backend: ") + op + ": tensor type " +
                                  gguf::tensorTypeName(t) + " is not supported for compute");
  }
}

}  // namespace

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
    for (UploadBuffer& b : uploads_)
      checkCuda(cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming), "cudaEventCreate");
    checkCublas(cublasCreate(&cublas_), "cublasCreate");
    checkCublas(cublasSetStream(cublas_, stream_), "cublasSetStream");
    // Plain FP32 GEMMs (no TF32 tensor-core rounding of the inputs).
    checkCublas(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    cuda::launchProbe(stream_);  // fails here, readably, when no kernel image fits this GPU
    synchronize();
  } catch (...) {
    release();
    throw;
  }
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::release() noexcept {
  if (stream_) cudaStreamSynchronize(stream_);
  for (float* p : allocations_) cudaFree(p);
  allocations_.clear();
  for (auto& [dev, bytes] : weights_) cudaFree(dev);
  weights_.clear();
  for (Scratch* s : {&tokens_, &rope_cs_, &tile_, &act_, &moe_x_act_, &moe_plan_, &moe_h_act_, &attn_})
    if (s->ptr) cudaFree(s->ptr), s->ptr = nullptr;
  if (pinned_) cudaFreeHost(pinned_), pinned_ = nullptr;
  if (readback_done_) cudaEventDestroy(readback_done_), readback_done_ = nullptr;
  for (UploadBuffer& b : uploads_) {
    if (b.ptr) cudaFreeHost(b.ptr), b.ptr = nullptr;
    if (b.done) cudaEventDestroy(b.done), b.done = nullptr;
  }
  if (cublas_) cublasDestroy(cublas_), cublas_ = nullptr;
  if (stream_) cudaStreamDestroy(stream_), stream_ = nullptr;
  cudaGetLastError();  // nothing here may leave an error for the next CUDA user
}

std::string CudaBackend::name() const {
  return "cuda (" + device_name_ + ", " + formatBytes(device_memory_) + ")";
}

void* CudaBackend::scratch(Scratch& s, size_t bytes, const char* what) {
  if (s.bytes >= bytes) return s.ptr;
  synchronize();  // queued kernels may still read the old buffer
  if (s.ptr) checkCuda(cudaFree(s.ptr), "cudaFree (scratch)");
  s.ptr = nullptr;
  s.bytes = 0;
  s.ptr = cudaMallocOrThrow(bytes, what);
  s.bytes = bytes;
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
    scratch(moe_plan_, sizeof(int) * cuda::kMaxCallExperts * (static_cast<size_t>(T * K) + 1),
            "MoE expert plan");
  }
  if (T > kMatvecTokens) {  // the F16/BF16 weights' dequantisation tile, as large as the largest needs
    size_t tile = 0;
    {
      std::lock_guard lock(alloc_mu_);
      tile = float_tile_bytes_;
    }
    if (tile) scratch(tile_, tile, "matmul dequantisation tile");
  }
  const size_t partials = cuda::attentionScratchBytesUpTo(n_ctx, c.n_head, c.n_head_kv, c.head_dim);
  if (partials) scratch(attn_, partials, "attention partials");
  // Read backs: the last token's logits, or a batch's routing.
  pinned(std::max<size_t>(size_t(c.n_vocab) * sizeof(float), 2 * T * K * sizeof(int32_t)));
  const size_t upload = std::max<size_t>(T * sizeof(int32_t), T * std::max(c.n_rot, 1) * sizeof(float));
  for (UploadBuffer& b : uploads_)
    if (b.bytes < upload) {
      synchronize();
      if (b.ptr) cudaFreeHost(b.ptr);
      b.ptr = nullptr;
      b.bytes = 0;
      b.pending = false;
      b.ptr = cudaHostAllocOrThrow(upload, "pinned upload buffer");
      b.bytes = upload;
    }
}

void CudaBackend::synchronize() { checkCuda(cudaStreamSynchronize(stream_), "cuda backend: synchronize"); }

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
  if (n) cuda::launchStoreHalf(src, static_cast<__half*>(dst.data) + first, n, stream_);
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
  void* staging = pinned(bytes);
  checkCuda(cudaMemcpyAsync(staging, src, bytes, cudaMemcpyDeviceToHost, stream_), "cuda backend: read back");
  checkCuda(cudaEventRecord(readback_done_, stream_), "cuda backend: read back: cudaEventRecord");
  checkCuda(cudaEventSynchronize(readback_done_), "cuda backend: read back: wait");
  std::memcpy(host_dst, staging, bytes);
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
  UploadBuffer& b = uploads_[next_upload_];
  next_upload_ = (next_upload_ + 1) % kUploadRing;
  if (b.pending && cudaEventQuery(b.done) != cudaSuccess) checkCuda(cudaEventSynchronize(b.done), what);
  b.pending = false;
  if (b.bytes < bytes) {
    if (b.ptr) cudaFreeHost(b.ptr);
    b.ptr = nullptr;
    b.bytes = 0;
    b.ptr = cudaHostAllocOrThrow(std::max<size_t>(bytes, 4096), "pinned upload buffer");
    b.bytes = std::max<size_t>(bytes, 4096);
  }
  std::memcpy(b.ptr, src, bytes);
  checkCuda(cudaMemcpyAsync(dst, b.ptr, bytes, cudaMemcpyHostToDevice, stream_), what);
  checkCuda(cudaEventRecord(b.done, stream_), what);
  b.pending = true;
}

// ---------------------------------------------------------------------------
// Weights

void CudaBackend::checkDeviceWeight(const WeightView& w, const char* op) const {
  if (w.empty() || w.cols <= 0 || w.rows <= 0)
    throw std::invalid_argument(std::string("cuda backend: ") + op + ": empty weight");
  elemType(w.type, op);
  // The kernels trust the layout: whole blocks per row, rows at least that long.
  const bool block_type = w.type == TensorType::Q8_0 || w.type == TensorType::Q4_0;
  const bool k_type = w.type == TensorType::Q4_K || w.type == TensorType::Q5_K || w.type == TensorType::Q6_K;
  if ((block_type && w.cols % quant::kBlockQ8_0 != 0) || (k_type && w.cols % quant::kBlockQK != 0) ||
      w.row_bytes < gguf::rowBytes(w.type, static_cast<uint64_t>(w.cols)))
    throw std::invalid_argument(std::string("cuda backend: ") + op + ": row of " + std::to_string(w.cols) +
                                " " + gguf::tensorTypeName(w.type) + " elements does not fit its " +
                                std::to_string(w.row_bytes) + "-byte row layout");
  // A kernel reading pageable host memory would kill the CUDA context; refuse it
  // with a message instead (pinned host memory is device-readable and allowed).
  // Asked once per address: prepared weights and cache slots keep theirs.
  {
    std::lock_guard lock(alloc_mu_);
    if (device_readable_.count(w.data)) return;
  }
  cudaPointerAttributes attr{};
  checkCuda(cudaPointerGetAttributes(&attr, w.data), "cudaPointerGetAttributes");
  const bool pageable = attr.type == cudaMemoryTypeUnregistered;
  // Pinned memory is read in place (over the bus) only where the device sees it at the same address.
  const bool unmapped = attr.type == cudaMemoryTypeHost && attr.devicePointer != w.data;
  if (pageable || unmapped)
    throw std::invalid_argument(std::string("cuda backend: ") + op + ": weight data is " +
                                (pageable ? "pageable" : "unmapped pinned") +
                                " host memory (prepareWeight it, or use a device expert cache)");
  std::lock_guard lock(alloc_mu_);
  device_readable_.insert(w.data);
}

void CudaBackend::embed(const WeightView& table, const int32_t* tokens, int n_tokens,
                        float* out) {  // table: [n_vocab][dim]; out: [n_tokens][dim]
  checkDeviceWeight(table, "embed");
  if (n_tokens <= 0) return;
  for (int t = 0; t < n_tokens; ++t)
    if (tokens[t] < 0 || tokens[t] >= table.rows)
      throw std::out_of_range("cuda backend: embed: token id " + std::to_string(tokens[t]) + " outside [0, " +
                              std::to_string(table.rows) + ")");
  auto* dev_tokens = static_cast<int32_t*>(scratch(tokens_, n_tokens * sizeof(int32_t), "token ids"));
  upload(dev_tokens, tokens, n_tokens * sizeof(int32_t), "cuda backend: embed: upload of token ids");
  cuda::launchEmbed(elemType(table.type, "embed"), table.data, table.row_bytes, table.cols, dev_tokens,
                    n_tokens, out, stream_);
}

// y (column-major m x n_tokens, leading dim ldy) = A^T x, where A is the weight
// stored row-major as [m][k] with row stride lda floats (= column-major k x m).
void CudaBackend::sgemm(const float* a, int64_t lda, int64_t m, const float* x, int64_t k, int n_tokens,
                        float* y, int64_t ldy) {
  const float alpha = 1.0f, beta = 0.0f;
  checkCublas(
      cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m), n_tokens, static_cast<int>(k),
                  &alpha, a, static_cast<int>(lda), x, static_cast<int>(k), &beta, y, static_cast<int>(ldy)),
      "cublasSgemm");
}

namespace {

bool isQuantised(TensorType t) {
  return t != TensorType::F32 && t != TensorType::F16 && t != TensorType::BF16;
}
// Activations quantised per 256 (Q8_K) rather than per 32 (Q8_0).
bool usesQ8K(TensorType t) { return t == TensorType::Q4_K || t == TensorType::Q5_K || t == TensorType::Q6_K; }
}  // namespace

const void* CudaBackend::activationsFor(const WeightView& w, const float* x, int n_tokens) {
  if (!isQuantised(w.type)) return x;
  void* act = scratch(act_, cuda::quantizedActBytes(w.cols, n_tokens), "quantised activations");
  cuda::launchQuantizeActs(elemType(w.type, "matmul"), x, w.cols, n_tokens, act, stream_);
  return act;
}

namespace {

// The matvec's passes over a weight: one per 8 tokens (cuda_matvec.cu).
uint64_t passes(int n_tokens) { return static_cast<uint64_t>((n_tokens + 7) / 8); }

uint64_t actBytes(const WeightView& w, int n_rows) {
  return !isQuantised(w.type) ? uint64_t(n_rows) * w.cols * sizeof(float)
                              : cuda::quantizedActBytes(w.cols, n_rows);
}

uint64_t viewBytes(const WeightView& w) { return uint64_t(w.rows) * w.row_bytes; }

}  // namespace

bool CudaBackend::gemmFor(gguf::TensorType t, int n_tokens) const {
  return int8_mma_ && isQuantised(t) && n_tokens > kMatvecTokens;
}

// Few tokens: the matvec. More: the int8 tensor-core GEMM where the device has
// it, for quantised weights (F16/BF16 go through matmulTiled beyond 8 tokens).
void CudaBackend::matmulQuantised(const WeightView& w, const void* act, float* y, int n_tokens) {
  const cuda::ElemType type = elemType(w.type, "matmul");
  traffic_.weight_bytes += viewBytes(w);
  if (gemmFor(w.type, n_tokens)) {
    traffic_.bytes_read += viewBytes(w) * cuda::gemmWeightPasses(n_tokens) +
                           actBytes(w, n_tokens) * cuda::gemmActivationPasses(w.rows);
    cuda::launchGemmQ(type, w.data, w.row_bytes, w.rows, act, w.cols, n_tokens, y, stream_);
    return;
  }
  traffic_.bytes_read += viewBytes(w) * passes(n_tokens) + actBytes(w, n_tokens);
  cuda::launchMatvecQ(type, w.data, w.row_bytes, w.rows, act, w.cols, n_tokens, y, stream_);
}

void CudaBackend::matmul(const WeightView& w, const float* x, float* y,
                         int n_tokens) {  // w: [rows][cols]; x: [n_tokens][cols]; y: [n_tokens][rows]
  checkDeviceWeight(w, "matmul");
  if (n_tokens <= 0) return;
  if (w.type == TensorType::F32) {
    // Counted as a GEMM reading A and x once.
    traffic_.weight_bytes += viewBytes(w);
    traffic_.bytes_read += viewBytes(w) + actBytes(w, n_tokens);
    sgemm(reinterpret_cast<const float*>(w.data), static_cast<int64_t>(w.row_bytes / sizeof(float)), w.rows,
          x, w.cols, n_tokens, y, w.rows);
  } else if (!isQuantised(w.type) && n_tokens > kMatvecTokens)
    matmulTiled(w, x, y, n_tokens);
  else
    matmulQuantised(w, activationsFor(w, x, n_tokens), y, n_tokens);
}

// Jobs reading the same x in the same activation format share one quantisation
// (q, k and v; gate and up): the stream runs in order, so act_ is rewritten only
// after the matvecs before it have read it.
void CudaBackend::matmulMany(std::span<const MatmulJob> jobs) {
  const float* quantised_x = nullptr;
  const void* act = nullptr;
  bool q8k = false;
  int64_t cols = 0;
  int n = 0;
  for (const MatmulJob& j : jobs) {
    const WeightView& w = j.w;
    if (!isQuantised(w.type)) {
      matmul(w, j.x, j.y, j.n_tokens);
      continue;
    }
    checkDeviceWeight(w, "matmul");
    if (j.n_tokens <= 0) continue;
    if (j.x != quantised_x || usesQ8K(w.type) != q8k || w.cols != cols || j.n_tokens != n) {
      act = activationsFor(w, j.x, j.n_tokens);
      quantised_x = j.x, q8k = usesQ8K(w.type), cols = w.cols, n = j.n_tokens;
    }
    matmulQuantised(w, act, j.y, j.n_tokens);
  }
}

// Rows [r0, r0 + nr) dequantised into the F32 tile, then one GEMM writes those
// rows of every token's output (column-major C starting at y + r0, ldc = rows).
void CudaBackend::matmulTiled(const WeightView& w, const float* x, float* y, int n_tokens) {
  const int64_t tile_rows = tileRows(w);
  auto* tile = static_cast<float*>(scratch(tile_, tileBytes(w), "matmul dequantisation tile"));
  const cuda::ElemType type = elemType(w.type, "matmul");
  // The weight once, and its F32 tile written then read by the GEMM.
  traffic_.weight_bytes += viewBytes(w);
  traffic_.bytes_read += viewBytes(w) + 2 * uint64_t(w.rows) * w.cols * sizeof(float) + actBytes(w, n_tokens);
  for (int64_t r0 = 0; r0 < w.rows; r0 += tile_rows) {
    const int64_t nr = std::min(tile_rows, w.rows - r0);
    cuda::launchDequantizeRows(type, w.data + static_cast<size_t>(r0) * w.row_bytes, w.row_bytes, w.cols, nr,
                               tile, stream_);
    sgemm(tile, w.cols, nr, x, w.cols, n_tokens, y + r0, w.rows);
  }
}

// ---------------------------------------------------------------------------
// Activations

void CudaBackend::rmsNorm(const float* x, const float* weight, float* y, int n_rows, int dim, float eps) {
  cuda::launchRmsNorm(x, weight, y, n_rows, dim, eps, stream_);
}

// cos/sin of every (token, pair), computed in double and rounded once to float
// exactly as the CPU backend's ropeAngles does, uploaded once per distinct
// positions vector (q and k of every layer of a step share it).
const float* CudaBackend::ropeTable(const int32_t* positions, int n_tokens, int n_rot, float freq_base) {
  const size_t n = static_cast<size_t>(n_tokens) * n_rot;
  const bool same = rope_n_rot_ == n_rot && rope_base_ == freq_base &&
                    rope_positions_.size() == size_t(n_tokens) &&
                    std::equal(positions, positions + n_tokens, rope_positions_.begin());
  if (same && rope_cs_.bytes >= n * sizeof(float)) return static_cast<const float*>(rope_cs_.ptr);
  rope_host_.resize(n);
  for (int t = 0; t < n_tokens; ++t)
    for (int i = 0; i < n_rot / 2; ++i) {
      const double freq = std::pow(static_cast<double>(freq_base), -2.0 * i / n_rot);
      const double theta = static_cast<double>(positions[t]) * freq;
      rope_host_[size_t(t) * n_rot + 2 * i] = static_cast<float>(std::cos(theta));
      rope_host_[size_t(t) * n_rot + 2 * i + 1] = static_cast<float>(std::sin(theta));
    }
  auto* dev = static_cast<float*>(scratch(rope_cs_, n * sizeof(float), "rope table"));
  // Invalidate before the copy: if it throws, the cache must not claim the new key.
  rope_positions_.clear();
  upload(dev, rope_host_.data(), n * sizeof(float), "cuda backend: rope table upload");
  rope_positions_.assign(positions, positions + n_tokens);
  rope_n_rot_ = n_rot;
  rope_base_ = freq_base;
  return dev;
}

void CudaBackend::rope(float* x, int n_tokens, int n_heads, int head_dim, int n_rot, const int32_t* positions,
                       float freq_base, RopeStyle style) {  // x: [n_tokens][n_heads][head_dim]
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > head_dim)
    throw std::invalid_argument("cuda backend: rope: n_rot " + std::to_string(n_rot) +
                                " must be even and in (0, head_dim = " + std::to_string(head_dim) + "]");
  if (n_tokens <= 0 || n_heads <= 0) return;
  const float* cs = ropeTable(positions, n_tokens, n_rot, freq_base);
  cuda::launchRope(x, n_tokens, n_heads, head_dim, n_rot, cs, style == RopeStyle::Neox, stream_);
}

void CudaBackend::attention(const float* q, const KvCache& k_cache, const KvCache& v_cache, int pos0,
                            int n_tokens, const AttentionShape& shape, float* out) {
  const int n_head = shape.n_head, n_head_kv = shape.n_head_kv, hd = shape.head_dim;
  if (n_head <= 0 || n_head_kv <= 0 || hd <= 0 || n_head % n_head_kv != 0 || pos0 < 0)
    throw std::invalid_argument("cuda backend: attention: bad shape n_head " + std::to_string(n_head) +
                                ", n_head_kv " + std::to_string(n_head_kv) + ", head_dim " +
                                std::to_string(hd));
  if (hd > cuda::kMaxHeadDim)
    throw std::invalid_argument("cuda backend: attention: head_dim " + std::to_string(hd) +
                                " above the supported " + std::to_string(cuda::kMaxHeadDim));
  if (k_cache.type != KvType::F16 || v_cache.type != KvType::F16)
    throw std::invalid_argument("cuda backend: attention: the KV cache must be F16 (allocKv)");
  if (!kvHoldsRows(k_cache, pos0, n_tokens, shape) || !kvHoldsRows(v_cache, pos0, n_tokens, shape))
    throw std::out_of_range("cuda backend: attention: rows up to " + std::to_string(pos0 + n_tokens) +
                            " past the KV cache");
  const size_t scratch_bytes = cuda::attentionScratchBytes(pos0, n_tokens, n_head, n_head_kv, hd);
  auto* partials =
      scratch_bytes ? static_cast<float*>(scratch(attn_, scratch_bytes, "attention partials")) : nullptr;
  cuda::launchAttention(q, static_cast<const __half*>(k_cache.data), static_cast<const __half*>(v_cache.data),
                        pos0, n_tokens, n_head, n_head_kv, hd, shape.scale, out, partials, scratch_bytes,
                        stream_);
}

void CudaBackend::swiglu(const float* gate, const float* up, float* out, size_t n) {
  cuda::launchSwiglu(gate, up, out, n, stream_);
}

void CudaBackend::add(float* y, const float* x, size_t n) { cuda::launchAdd(y, x, n, stream_); }

void CudaBackend::axpy(float* y, const float* x, float a, size_t n) { cuda::launchAxpy(y, x, a, n, stream_); }

}  // namespace moe

// ---------------------------------------------------------------------------
// The MoE block

namespace moe {

void CudaBackend::sigmoidGatedAdd(float* y, const float* x, const float* gate_logits, int n_rows, int width) {
  cuda::launchSigmoidGatedAdd(y, x, gate_logits, n_rows, width, stream_);
}

void CudaBackend::routeTopK(const float* logits, int n_tokens, const RoutingRule& rule, float* routing,
                            int32_t* host_ids, float* host_weights) {
  if (n_tokens <= 0) return;
  if (rule.k <= 0 || rule.k > rule.n_expert)
    throw std::invalid_argument("cuda backend: routeTopK: " + std::to_string(rule.k) + " of " +
                                std::to_string(rule.n_expert) + " experts");
  const size_t n = static_cast<size_t>(n_tokens) * rule.k;
  auto* ids = reinterpret_cast<int*>(routing);
  if (rule.n_expert <= cuda::kMaxRouteExperts && rule.k <= cuda::kMaxRouteK) {
    cuda::launchRouteTopK(logits, n_tokens, rule.n_expert, rule.k, rule.gating == GatingFunc::Softmax,
                          rule.norm_topk, rule.scale, ids, routing + n, stream_);
    // ids and weights are adjacent: one read back of both.
    std::vector<int32_t> both(2 * n);
    readBack(both.data(), routing, both.size() * sizeof(int32_t));
    std::memcpy(host_ids, both.data(), n * sizeof(int32_t));
    std::memcpy(host_weights, both.data() + n, n * sizeof(float));
    return;
  }
  // A router wider than the kernel's shared memory: routed on the host, the same rule.
  std::vector<float> host_logits(static_cast<size_t>(n_tokens) * rule.n_expert);
  toHost(host_logits.data(), logits, host_logits.size());
  for (int t = 0; t < n_tokens; ++t)
    routeToken(&host_logits[size_t(t) * rule.n_expert], rule, host_ids + size_t(t) * rule.k,
               host_weights + size_t(t) * rule.k);
  static_assert(sizeof(int32_t) == sizeof(float));
  fromHost(routing, reinterpret_cast<const float*>(host_ids), n);
  fromHost(routing + n, host_weights, n);
}

// Consecutive experts of the same weight types, at most kMaxCallExperts, go to
// the device as one table: one set of launches each.
void CudaBackend::moeExperts(const MoeExpertsCall& c) {
  if (c.experts.empty() || c.n_tokens <= 0) return;
  const int n_slots = c.n_tokens * c.k;
  cuda::MoeLaunch m;
  m.n_embd = c.n_embd;
  m.n_ff = c.n_ff;
  m.n_tokens = c.n_tokens;
  m.k = c.k;
  m.n_slots = n_slots;
  m.x = c.x;
  m.ids = reinterpret_cast<const int*>(c.routing);
  m.h = c.h;
  m.outputs = c.outputs;
  m.x_act = scratch(moe_x_act_, cuda::quantizedActBytes(c.n_embd, c.n_tokens), "MoE activations");
  m.h_act = scratch(moe_h_act_, cuda::quantizedActBytes(c.n_ff, n_slots), "MoE expert activations");
  m.plan = static_cast<int*>(scratch(moe_plan_,
                                     sizeof(int) * cuda::kMaxCallExperts * (static_cast<size_t>(n_slots) + 1),
                                     "MoE expert plan"));
  auto flush = [&] {
    if (m.table.count > 0) cuda::launchMoeExperts(m, stream_);
    m.table.count = 0;
  };
  for (const ExpertRef* ref : c.experts) {
    const ExpertWeights& w = ref->weights;
    checkDeviceWeight(w.gate, "MoE gate");
    checkDeviceWeight(w.up, "MoE up");
    checkDeviceWeight(w.down, "MoE down");
    if (w.gate.type != w.up.type || w.gate.row_bytes != w.up.row_bytes || w.gate.rows != c.n_ff ||
        w.up.rows != c.n_ff || w.gate.cols != c.n_embd || w.up.cols != c.n_embd || w.down.rows != c.n_embd ||
        w.down.cols != c.n_ff)
      throw std::invalid_argument("cuda backend: expert " + std::to_string(ref->expert) +
                                  ": gate/up/down shapes or types do not match the layer");
    const cuda::ElemType up = elemType(w.gate.type, "MoE"), down = elemType(w.down.type, "MoE");
    if (m.table.count == cuda::kMaxCallExperts ||
        (m.table.count > 0 && (up != m.up_type || down != m.down_type || w.gate.row_bytes != m.up_row_bytes ||
                               w.down.row_bytes != m.down_row_bytes)))
      flush();
    m.up_type = up, m.down_type = down;
    m.up_row_bytes = w.gate.row_bytes, m.down_row_bytes = w.down.row_bytes;
    m.up_gemm = gemmFor(w.gate.type, c.n_tokens), m.down_gemm = gemmFor(w.down.type, c.n_tokens);
    if (c.host_ids) {
      const int served = static_cast<int>(std::count(c.host_ids, c.host_ids + n_slots, ref->expert));
      const uint64_t gate_up = viewBytes(w.gate) + viewBytes(w.up), down = viewBytes(w.down);
      traffic_.weight_bytes += gate_up + down;
      traffic_.bytes_read += m.up_gemm ? gate_up * cuda::gemmWeightPasses(served) +
                                             2 * actBytes(w.gate, served) * cuda::gemmActivationPasses(c.n_ff)
                                       : gate_up * passes(served) + actBytes(w.gate, served);
      traffic_.bytes_read += m.down_gemm ? down * cuda::gemmWeightPasses(served) +
                                               actBytes(w.down, served) * cuda::gemmActivationPasses(c.n_embd)
                                         : down * passes(served) + actBytes(w.down, served);
    }
    const int i = m.table.count++;
    m.table.ids[i] = ref->expert;
    m.table.gate[i] = w.gate.data;
    m.table.up[i] = w.up.data;
    m.table.down[i] = w.down.data;
  }
  flush();
}

void CudaBackend::moeCombine(const float* outputs, const float* routing, int n_tokens, int k, int n_embd,
                             float* out) {
  cuda::launchMoeCombine(outputs, routing + static_cast<size_t>(n_tokens) * k, n_tokens, k, n_embd, out,
                         stream_);
}

}  // namespace moe
