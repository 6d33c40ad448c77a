// Element formats of ggml tensors: half/bfloat conversion and the block
// quantisations the engine computes (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 in
// blocks of 32; Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS and the grid-coded IQ1_S, IQ1_M,
// IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S in blocks of 256), exactly as the GGUF/ggml
// block definitions give them (quant_decode.cpp, quant_grids.h, shared/GGUF-NOTES.md).
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

// The types the engine computes with, in the order tools list them.
inline constexpr gguf::TensorType kComputeTypes[] = {
    gguf::TensorType::F32,    gguf::TensorType::F16,     gguf::TensorType::BF16,    gguf::TensorType::Q8_0,
    gguf::TensorType::Q4_0,   gguf::TensorType::Q4_1,    gguf::TensorType::Q5_0,    gguf::TensorType::Q5_1,
    gguf::TensorType::IQ4_NL, gguf::TensorType::MXFP4,   gguf::TensorType::Q2_K,    gguf::TensorType::Q3_K,
    gguf::TensorType::Q4_K,   gguf::TensorType::Q5_K,    gguf::TensorType::Q6_K,    gguf::TensorType::IQ4_XS,
    gguf::TensorType::IQ1_S,  gguf::TensorType::IQ1_M,   gguf::TensorType::IQ2_XXS, gguf::TensorType::IQ2_XS,
    gguf::TensorType::IQ2_S,  gguf::TensorType::IQ3_XXS, gguf::TensorType::IQ3_S};

// True for the types in kComputeTypes. I8/I16/I32 and unknown types are not.
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
