// Kernels that read weights in their file type: embedding lookup, row
// dequantisation (the batched matmul of F16/BF16 weights dequantises a tile, then
// cuBLAS multiplies). Block layouts as quant/quant.h gives them:
//   Q8_0: 34 bytes per 32 elements: f16 d, int8 q[32];          x[j] = d * q[j]
//   Q4_0: 18 bytes per 32 elements: f16 d, u8 qs[16];           x[j] = d * ((qs[j] & 15) - 8),
//                                                               x[j + 16] = d * ((qs[j] >> 4) - 8)
//   K-quants, 256 elements per block in sub-blocks of 32 (k = (c % 256) / 32, l = c % 32):
//   Q4_K: 144 bytes: f16 d, f16 dmin, scales[12], qs[128]; x = (d*sc_k) * q - dmin*m_k,
//         q = nibble (k odd: high) of qs[32*(k/2) + l], (sc_k, m_k) 6-bit pair k of scales
//   Q5_K: 176 bytes: as Q4_K with qh[32] before qs; bit k of qh[l] adds 16 to q
//   Q6_K: 210 bytes: ql[128], qh[64], int8 scales[16], f16 d; half h = (c % 256) / 128,
//         group g = (c % 128) / 32: q = (nibble g >= 2 of ql[64h + 32(g&1) + l]) | (bits
//         2g..2g+1 of qh[32h + l]) << 4; x = (d * scales[(c % 256) / 16]) * (q - 32)
//   (the same decoding as quant/quant.cpp, whose comment gives the sources). The
//   products there are exact in f32, so a fused multiply-add gives the same floats.
// Multi-byte fields are read byte by byte (little endian): a row of an expert slot
// or a Q8_0 block is only 2-byte aligned, and this keeps every read legal.
#include <cuda_fp16.h>

#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/cuda/cuda_launch.h"
#include "inference/cuda/cuda_quant.cuh"

namespace moe::cuda {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint16_t load16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}

__device__ __forceinline__ float halfBits(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }

// Element j (0..255) of a Q4_K (qh == nullptr) or Q5_K block; qs: [128] of the block.
__device__ __forceinline__ float decodeQ45K(const uint8_t* blk, const uint8_t* qh, const uint8_t* qs, int j) {
  const int k = j / 32, l = j % 32;
  int sc = 0, m = 0;
  scaleMinK4(blk + 4, k, sc, m);
  int q = (qs[32 * (k / 2) + l] >> (4 * (k % 2))) & 15;
  if (qh) q |= ((qh[l] >> k) & 1) << 4;
  return (halfBits(load16(blk)) * static_cast<float>(sc)) * static_cast<float>(q) -
         halfBits(load16(blk + 2)) * static_cast<float>(m);
}

__device__ __forceinline__ float decodeQ6K(const uint8_t* blk, int j) {  // j: 0..255
  const int h = j / 128, g = (j % 128) / 32, l = j % 32;
  const int lo = (blk[64 * h + 32 * (g & 1) + l] >> (4 * (g >> 1))) & 15;
  const int hi = (blk[128 + 32 * h + l] >> (2 * g)) & 3;
  const float sc = static_cast<float>(static_cast<int8_t>(blk[192 + j / 16]));
  return (halfBits(load16(blk + 208)) * sc) * static_cast<float>((lo | (hi << 4)) - 32);
}

// Element c of a type added later, through its unit (cuda_quant.cuh): the same
// integer values and scales the matvec uses, so the same exact products.
template <ElemType T>
__device__ __forceinline__ float decodeViaUnit(const uint8_t* row, int64_t c) {
  const Unit un = loadUnit<T>(row, static_cast<int>(c / 32));
  const int j = static_cast<int>(c % 32), half = j / 16;
  const int q = static_cast<int8_t>(static_cast<uint32_t>(un.v[j / 4]) >> (8 * (j % 4)));
  const int sc = half ? un.sc1 : un.sc0;
  if constexpr (T == ElemType::Q4_1 || T == ElemType::Q5_1) return un.d * static_cast<float>(q) + un.dmin;
  if constexpr (T == ElemType::Q2_K)
    return (un.d * static_cast<float>(sc)) * static_cast<float>(q) -
           un.dmin * static_cast<float>(half ? un.m >> 8 : un.m & 0xff);
  return (un.d * static_cast<float>(sc)) * static_cast<float>(q - un.bias);
}

// Element c of a row encoded as `type` (c < cols; quantised cols are multiples of
// 32, of 256 for the K-quants).
__device__ __forceinline__ float decode(ElemType type, const uint8_t* row, int64_t c) {
  switch (type) {
    case ElemType::F32: return reinterpret_cast<const float*>(row)[c];
    case ElemType::F16: return halfBits(load16(row + 2 * c));
    case ElemType::BF16: return __uint_as_float(static_cast<uint32_t>(load16(row + 2 * c)) << 16);
    case ElemType::Q8_0: {
      const uint8_t* blk = row + (c / 32) * 34;
      return halfBits(load16(blk)) * static_cast<float>(static_cast<int8_t>(blk[2 + c % 32]));
    }
    case ElemType::Q4_0: {
      const uint8_t* blk = row + (c / 32) * 18;
      const int j = static_cast<int>(c % 32);
      const uint8_t byte = blk[2 + (j & 15)];
      const int nibble = j < 16 ? (byte & 0x0f) : (byte >> 4);
      return halfBits(load16(blk)) * static_cast<float>(nibble - 8);
    }
    case ElemType::Q4_K: {
      const uint8_t* blk = row + (c / 256) * 144;
      return decodeQ45K(blk, nullptr, blk + 16, static_cast<int>(c % 256));
    }
    case ElemType::Q5_K: {
      const uint8_t* blk = row + (c / 256) * 176;
      return decodeQ45K(blk, blk + 16, blk + 48, static_cast<int>(c % 256));
    }
    case ElemType::Q6_K: return decodeQ6K(row + (c / 256) * 210, static_cast<int>(c % 256));
    case ElemType::Q4_1: return decodeViaUnit<ElemType::Q4_1>(row, c);
    case ElemType::Q5_0: return decodeViaUnit<ElemType::Q5_0>(row, c);
    case ElemType::Q5_1: return decodeViaUnit<ElemType::Q5_1>(row, c);
    case ElemType::IQ4_NL: return decodeViaUnit<ElemType::IQ4_NL>(row, c);
    case ElemType::MXFP4: return decodeViaUnit<ElemType::MXFP4>(row, c);
    case ElemType::Q2_K: return decodeViaUnit<ElemType::Q2_K>(row, c);
    case ElemType::Q3_K: return decodeViaUnit<ElemType::Q3_K>(row, c);
    case ElemType::IQ4_XS: return decodeViaUnit<ElemType::IQ4_XS>(row, c);
    case ElemType::IQ1_S: return decodeViaUnit<ElemType::IQ1_S>(row, c);
    case ElemType::IQ1_M: return decodeViaUnit<ElemType::IQ1_M>(row, c);
    case ElemType::IQ2_XXS: return decodeViaUnit<ElemType::IQ2_XXS>(row, c);
    case ElemType::IQ2_XS: return decodeViaUnit<ElemType::IQ2_XS>(row, c);
    case ElemType::IQ2_S: return decodeViaUnit<ElemType::IQ2_S>(row, c);
    case ElemType::IQ3_XXS: return decodeViaUnit<ElemType::IQ3_XXS>(row, c);
    case ElemType::IQ3_S: return decodeViaUnit<ElemType::IQ3_S>(row, c);
  }
  return 0.0f;
}

__global__ void embedKernel(ElemType type, const uint8_t* table, size_t row_bytes, int64_t cols,
                            const int32_t* tokens, int64_t total, float* out) {  // total = n_tokens * cols
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t t = i / cols, c = i % cols;
    out[i] = decode(type, table + static_cast<size_t>(tokens[t]) * row_bytes, c);
  }
}

__global__ void dequantizeRowsKernel(ElemType type, const uint8_t* w, size_t row_bytes, int64_t cols,
                                     int64_t total, float* out) {  // total = n_rows * cols
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const int64_t r = i / cols, c = i % cols;
    out[i] = decode(type, w + static_cast<size_t>(r) * row_bytes, c);
  }
}

unsigned gridFor(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < (int64_t{1} << 20) ? (blocks > 0 ? blocks : 1) : (int64_t{1} << 20));
}

}  // namespace

void launchEmbed(ElemType type, const uint8_t* table, size_t row_bytes, int64_t cols, const int32_t* tokens,
                 int n_tokens, float* out, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(n_tokens) * cols;
  if (total <= 0) return;
  launchKernel(embedKernel, gridFor(total, kThreads), kThreads, 0, stream, type, table, row_bytes, cols,
               tokens, total, out);
  checkLaunch("embed kernel");
}

void launchDequantizeRows(ElemType type, const uint8_t* w, size_t row_bytes, int64_t cols, int64_t n_rows,
                          float* out, cudaStream_t stream) {
  const int64_t total = n_rows * cols;
  if (total <= 0) return;
  launchKernel(dequantizeRowsKernel, gridFor(total, kThreads), kThreads, 0, stream, type, w, row_bytes, cols,
               total, out);
  checkLaunch("dequantize kernel");
}

}  // namespace moe::cuda
