// Element formats of ggml tensors: half/bfloat conversion and the block
// quantisations the engine computes (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K), exactly as the GGUF/ggml
// block definitions give them (shared/GGUF-NOTES.md, "Block formats").
#pragma once

#include <cstdint>

#include "models/gguf.h"

namespace moe::quant {

float fp16ToFp32(uint16_t h);
uint16_t fp32ToFp16(float f);  // round to nearest even, as IEEE 754
float bf16ToFp32(uint16_t b);  // bits << 16
uint16_t fp32ToBf16(float f);  // round to nearest even; NaN stays NaN

inline constexpr int kBlockQ8_0 = 32;  // elements; 34 bytes: f16 d, int8 q[32]
inline constexpr int kBlockQ4_0 = 32;  // elements; 18 bytes: f16 d, u8 qs[16]
// K-quants (Q4_K 144, Q5_K 176, Q6_K 210 bytes per block): rows are whole blocks of 256.
inline constexpr int kBlockQK = 256;

// True for the types the CPU backend can compute with (F32, F16, BF16, Q8_0, Q4_0,
// Q4_K, Q5_K, Q6_K). Q2_K, Q3_K, MXFP4 and the rest are not.
bool isComputeSupported(gguf::TensorType t);

// dst[0..n) = the n elements encoded at src. n must be a multiple of the block size.
void dequantizeRow(gguf::TensorType t, const uint8_t* src, float* dst, int64_t n);

// Encodes n floats (reference quantisation as ggml's quantize_row_*_ref: Q8_0
// d = amax/127, q = round(x/d); Q4_0 d = max/-8 with the sign of the largest
// magnitude, q = min(15, (int8)(x/d + 8.5))). Q4_K/Q5_K/Q6_K use a simple
// deterministic quantiser of our own (see quant.cpp), not llama.cpp's search, so
// their bytes differ from llama-quantize's. dst holds rowBytes(t, n) bytes.
void quantizeRow(gguf::TensorType t, const float* src, uint8_t* dst, int64_t n);

// sum_i dequant(row)[i] * x[i] without materialising the row. row: rowBytes(t, n)
// bytes; x: [n]. Uses AVX2/FMA/F16C when the CPU has them. For a given CPU,
// dotRow(t, row, x, n) == dotRow(F32, dequantizeRow(t, row), x, n) exactly (same
// summation order for every type), so batched and one-token matmuls agree.
// Unsupported types throw std::invalid_argument naming the type.
float dotRow(gguf::TensorType t, const uint8_t* row, const float* x, int64_t n);

// The portable (no SIMD) dotRow, the reference the SIMD path is tested against.
float dotRowReference(gguf::TensorType t, const uint8_t* row, const float* x, int64_t n);

}  // namespace moe::quant
