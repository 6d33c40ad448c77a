// CudaBackend: weights checked once per address, embedding, and the matmuls
// (matvec, int8 tensor-core GEMM, dequantised tile + cuBLAS), with the bytes
// they read counted from their launches (matmulTraffic).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "inference/cuda/cuda_backend.h"
#include "inference/cuda/cuda_backend_internal.h"
#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "quant/quant.h"

namespace moe {

using gguf::TensorType;
using namespace cuda_backend;

// ---------------------------------------------------------------------------
// Weights

void CudaBackend::checkDeviceWeight(const WeightView& w, const char* op) const {
  if (w.empty() || w.cols <= 0 || w.rows <= 0)
    throw std::invalid_argument(std::string("cuda backend: ") + op + ": empty weight");
  elemType(w.type, op);
  // The kernels trust the layout: whole blocks per row, rows at least that long.
  const auto traits = gguf::typeTraits(static_cast<uint32_t>(w.type));
  if ((traits && w.cols % traits->block_elems != 0) ||
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
  const bool chosen = capturing_ && step_.token_chosen_on_device;  // the host does not know it
  for (int t = 0; t < n_tokens && !chosen; ++t)
    if (tokens[t] < 0 || tokens[t] >= table.rows)
      throw std::out_of_range("cuda backend: embed: token id " + std::to_string(tokens[t]) + " outside [0, " +
                              std::to_string(table.rows) + ")");
  const int32_t* dev_tokens = nullptr;
  if (capturing_) {  // a recorded step's token, read on the device
    if (n_tokens != 1 || (!chosen && tokens[0] != step_.token)) {
      graphs_failed_ = true;
      throw StepCaptureFailed("a recorded step embeds its own token");
    }
    dev_tokens = static_cast<const int32_t*>(step_dev_.ptr);
  } else {
    auto* dev = static_cast<int32_t*>(scratch(tokens_, n_tokens * sizeof(int32_t), "token ids"));
    upload(dev, tokens, n_tokens * sizeof(int32_t), "cuda backend: embed: upload of token ids");
    dev_tokens = dev;
  }
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

const void* CudaBackend::activationsFor(const WeightView& w, const float* x, int n_tokens) {
  if (!isQuantised(w.type)) return x;
  void* act = scratch(act_, cuda::quantizedActBytes(w.cols, n_tokens), "quantised activations");
  cuda::launchQuantizeActs(elemType(w.type, "matmul"), x, w.cols, n_tokens, act, stream_);
  return act;
}

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
  traffic_.bytes_read += viewBytes(w) * matvecPasses(n_tokens) + actBytes(w, n_tokens);
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
// after the matvecs before it have read it. Those of one type that take the matvec
// (few tokens; quantised, F16 or BF16 weights) also share one launch.
void CudaBackend::matmulMany(std::span<const MatmulJob> jobs) {
  const float* act_x = nullptr;  // the x that `act` was made from, in the format of `act_float`/`q8k`
  const void* act = nullptr;
  bool act_float = false, q8k = false;
  int64_t cols = 0;
  int n = 0;
  cuda::MatvecGroup group;
  cuda::ElemType group_type{};
  auto flush = [&] {
    if (group.count > 0) cuda::launchMatvecGroupQ(group_type, group, act, cols, n, stream_);
    group.count = 0;
  };
  for (const MatmulJob& j : jobs) {
    const WeightView& w = j.w;
    const bool is_float = !isQuantised(w.type);
    if (w.type == TensorType::F32 || (is_float && j.n_tokens > kMatvecTokens)) {  // cuBLAS or tiles
      matmul(w, j.x, j.y, j.n_tokens);
      continue;
    }
    checkDeviceWeight(w, "matmul");
    if (j.n_tokens <= 0) continue;
    if (j.x != act_x || is_float != act_float || usesQ8K(w.type) != q8k || w.cols != cols ||
        j.n_tokens != n) {
      flush();
      act = activationsFor(w, j.x, j.n_tokens);
      act_x = j.x, act_float = is_float, q8k = usesQ8K(w.type), cols = w.cols, n = j.n_tokens;
    }
    if (gemmFor(w.type, j.n_tokens)) {
      matmulQuantised(w, act, j.y, j.n_tokens);
      continue;
    }
    const cuda::ElemType type = elemType(w.type, "matmul");
    if (group.count == cuda::MatvecGroup::kMax || (group.count > 0 && type != group_type)) flush();
    traffic_.weight_bytes += viewBytes(w);
    traffic_.bytes_read += viewBytes(w) * matvecPasses(j.n_tokens) + actBytes(w, j.n_tokens);
    const int m = group.count++;
    group_type = type;
    group.w[m] = w.data, group.row_bytes[m] = w.row_bytes, group.rows[m] = w.rows, group.y[m] = j.y;
  }
  flush();
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

}  // namespace moe
