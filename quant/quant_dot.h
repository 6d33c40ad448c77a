// Integer dot products of quantised weight rows with quantised activations, the
// arithmetic of the GGUF family's "vec_dot" types: activations are quantised once
// per matmul to 8-bit blocks, then every weight row is dotted with them in integers
// and scaled per block.
//
//   weights        activations (ActivationFormat)
//   Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4
//                  Q8_0 blocks of 32: { f16 d; int8 q[32] }, d = amax/127
//   Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S
//                  Q8_K blocks of 256: { f32 d; int8 q[256]; int16 bsums[16] },
//                  d = -max/127 where max is the signed element of largest magnitude
//                  (the first one), bsums = sums of 16 consecutive q
//   (ggml-common.h block_q8_0 / block_q8_K and quantize_row_q8_0_ref /
//   quantize_row_q8_K_ref define these layouts and scales; rounding here is to
//   nearest, ties to even, on every code path.)
//
// The summation is defined once, so every code path (portable, AVX2, AVX-512 VNNI),
// every tile shape and every weight layout (the file's, or quant_repack.h's
// interleaved groups) gives the same bits for a (row, activation) pair. Integers are
// exact; every float operation is a single IEEE rounding (fma included).
//   Q8_0:  8 float lanes acc[l], zero at the start; per block of 32
//            p[l] = sum of w*x over elements 4l..4l+3 (exact int32)
//            acc[l] = fma(dw*dx, p[l], acc[l])
//          result = ((acc0+acc4) + (acc2+acc6)) + ((acc1+acc5) + (acc3+acc7))
//   Q4_0, Q4_K, Q5_K, Q6_K: one float acc, zero at the start; per block one exact
//          int32 total P (and M), taken in block order:
//     Q4_0:      P = sum over the 32 elements of (nibble - 8) * x
//                acc = fma(float(P), dw*dx, acc)
//     Q4_K/Q5_K: P = sum over sub-blocks j of sc_j * (sum of q*x over sub-block j)
//                M = sum over j of m_j * (sum of x over sub-block j)
//                acc = fma(float(P), d*dx, acc); acc = fma(float(M), -(dmin*dx), acc)
//     Q6_K:      P = sum over groups g of 16 of sc_g * (sum of (q - 32) * x over g)
//                acc = fma(float(P), d*dx, acc)
//     Q5_0, IQ4_NL, MXFP4: as Q4_0 with the block's integer values (q - 16,
//                kIq4Values[nibble], kMxfp4Values[nibble]) and scale (MXFP4: 2^(e-128))
//     Q4_1/Q5_1: P = sum of q*x, S = the activation block's sum of x
//                acc = fma(float(P), dw*dx, acc); acc = fma(float(S), m*dx, acc)
//     Q2_K:      as Q4_K over 16 sub-blocks of 16 (4-bit sc and m, q in 0..3)
//     Q3_K:      P = sum over sub-blocks k of 16 of (sc_k - 32) * (sum of q*x), q in -4..3
//                acc = fma(float(P), d*dx, acc)
//     IQ4_XS:    P = sum over sub-blocks k of 32 of (ls_k - 32) * (sum of value*x)
//                acc = fma(float(P), d*dx, acc)
//     IQ2_*, IQ3_*: P = sum over groups g of 8 of m_g * (sum of q*x over g), q the signed
//                grid value, m_g = 2s + 1 (quant_grids.h)
//                acc = fma(float(P), (d*f) * dx, acc), f = 1/8 (IQ2), 1/4 (IQ3_XXS), 1 (IQ3_S)
//     IQ1_S, IQ1_M: P = sum over groups g of m_g * (8 * (sum of q*x) + delta_g * (sum of x))
//                acc = fma(float(P), (d/8) * dx, acc)
//          result = acc
// (float(P) rounds to nearest even where |P| > 2^24, the same on every path.) A type
// without a kernel for an instruction set runs the portable one there (the same bits). One
// total per block is what an interleaved layout's lanes hold (one lane per row);
// the file-layout kernels add their lanes up per block to match it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "models/gguf.h"

namespace moe::quant {

// Instruction sets the dot kernels exist for; the best the CPU has is used unless a
// test or the bench asks for one.
enum class DotIsa { Portable, Avx2, Avx512 };
bool dotIsaAvailable(DotIsa isa);
DotIsa bestDotIsa();
const char* dotIsaName(DotIsa isa);

enum class ActivationFormat { None, Q8_0, Q8_K };

// The activation format a weight type is dotted with; None: F32/F16/BF16 (dotted in
// float by dotRow). Throws std::invalid_argument for types not computed.
ActivationFormat activationFormat(gguf::TensorType weights);

inline constexpr int kQ8_0ActBytes = 34;   // per 32 elements (then see below)
inline constexpr int kQ8_KActBytes = 292;  // per 256 elements: 4 + 256 + 2 * 16

// A Q8_0 activation row of nb blocks is the nb blocks, then each block's d as an f32
// (the same f16 value, converted once), then each block's sum of q as an int32.
// Bytes of one quantised activation row of n elements (n a whole number of blocks).
size_t activationRowBytes(ActivationFormat f, int64_t n);

// x: [n] -> dst: activationRowBytes(f, n) bytes. Every instruction set writes the
// same bytes; the first form uses the best one.
void quantizeActivations(ActivationFormat f, const float* x, int64_t n, uint8_t* dst);
void quantizeActivations(DotIsa isa, ActivationFormat f, const float* x, int64_t n, uint8_t* dst);

// A tile of dot products: y[t * y_stride + r] = row r . activation t for r < nr,
// t < nt. rows: nr rows of type t, row_bytes apart, n elements each; act: nt
// activation rows in activationFormat(t), act_stride bytes apart. Any nr, nt >= 0.
void dotTile(DotIsa isa, gguf::TensorType t, const uint8_t* rows, size_t row_bytes, int nr,
             const uint8_t* act, size_t act_stride, int nt, int64_t n, float* y, size_t y_stride);

// dotTile for weights in quant_repack.h's interleaved layout: ngroups groups of
// kRowGroup rows, group_bytes apart; y[t * y_stride + r] for r < 8 * ngroups. The
// same bits as dotTile on the rows in the file layout.
void dotGroups(DotIsa isa, gguf::TensorType t, const uint8_t* groups, size_t group_bytes, int ngroups,
               const uint8_t* act, size_t act_stride, int nt, int64_t n, float* y, size_t y_stride);

// One (row, activation) pair: dotTile with nr = nt = 1.
float dotQuantized(DotIsa isa, gguf::TensorType t, const uint8_t* row, const uint8_t* act, int64_t n);

}  // namespace moe::quant
