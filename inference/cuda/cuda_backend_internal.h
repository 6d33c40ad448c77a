// Helpers the CudaBackend's source files share (cuda_backend*.cpp): the tensor
// type's kernel type, and the sizes its matmul accounting counts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "inference/backend.h"
#include "inference/cuda/cuda_kernels.h"
#include "models/gguf.h"

namespace moe::cuda_backend {

// The batched matmul of a non-F32 weight dequantises at most this many floats
// (64 MiB) of rows at a time before cublasSgemm multiplies them.
inline constexpr int64_t kTileFloats = int64_t{1} << 24;
// Matmuls of more tokens than this take the GEMM: the int8 tensor-core one for
// quantised weights, a dequantised tile and cuBLAS for F16/BF16.
inline constexpr int kMatvecTokens = 8;

inline int64_t tileRows(const WeightView& w) {
  return std::clamp<int64_t>(kTileFloats / std::max<int64_t>(w.cols, 1), 1, w.rows);
}
inline size_t tileBytes(const WeightView& w) {
  return static_cast<size_t>(tileRows(w) * w.cols) * sizeof(float);
}

inline cuda::ElemType elemType(gguf::TensorType t, const char* op) {
  using gguf::TensorType;
  switch (t) {
    case TensorType::F32: return cuda::ElemType::F32;
    case TensorType::F16: return cuda::ElemType::F16;
    case TensorType::BF16: return cuda::ElemType::BF16;
    case TensorType::Q8_0: return cuda::ElemType::Q8_0;
    case TensorType::Q4_0: return cuda::ElemType::Q4_0;
    case TensorType::Q4_K: return cuda::ElemType::Q4_K;
    case TensorType::Q5_K: return cuda::ElemType::Q5_K;
    case TensorType::Q6_K: return cuda::ElemType::Q6_K;
    case TensorType::Q4_1: return cuda::ElemType::Q4_1;
    case TensorType::Q5_0: return cuda::ElemType::Q5_0;
    case TensorType::Q5_1: return cuda::ElemType::Q5_1;
    case TensorType::IQ4_NL: return cuda::ElemType::IQ4_NL;
    case TensorType::MXFP4: return cuda::ElemType::MXFP4;
    case TensorType::Q2_K: return cuda::ElemType::Q2_K;
    case TensorType::Q3_K: return cuda::ElemType::Q3_K;
    case TensorType::IQ4_XS: return cuda::ElemType::IQ4_XS;
    case TensorType::IQ1_S: return cuda::ElemType::IQ1_S;
    case TensorType::IQ1_M: return cuda::ElemType::IQ1_M;
    case TensorType::IQ2_XXS: return cuda::ElemType::IQ2_XXS;
    case TensorType::IQ2_XS: return cuda::ElemType::IQ2_XS;
    case TensorType::IQ2_S: return cuda::ElemType::IQ2_S;
    case TensorType::IQ3_XXS: return cuda::ElemType::IQ3_XXS;
    case TensorType::IQ3_S: return cuda::ElemType::IQ3_S;
    default:
      throw std::invalid_argument(std::string("cuda backend: ") + op + ": tensor type " +
                                  gguf::tensorTypeName(t) + " is not supported for compute");
  }
}

inline bool isQuantised(gguf::TensorType t) {
  return t != gguf::TensorType::F32 && t != gguf::TensorType::F16 && t != gguf::TensorType::BF16;
}
// Activations quantised per 256 (Q8_K) rather than per 32 (Q8_0).
inline bool usesQ8K(gguf::TensorType t) {
  return gguf::typeTraits(static_cast<uint32_t>(t))->block_elems == 256;
}

// The matvec's passes over a weight: one per 8 tokens (cuda_matvec.cu).
inline uint64_t matvecPasses(int n_tokens) { return static_cast<uint64_t>((n_tokens + 7) / 8); }

inline uint64_t actBytes(const WeightView& w, int n_rows) {
  return !isQuantised(w.type) ? uint64_t(n_rows) * w.cols * sizeof(float)
                              : cuda::quantizedActBytes(w.cols, n_rows);
}

inline uint64_t viewBytes(const WeightView& w) { return uint64_t(w.rows) * w.row_bytes; }

}  // namespace moe::cuda_backend
