// The grid-coded IQ types on the device: their lattice tables (the same entries as
// quant/quant_grids.cpp, from quant/grids/*.inc) and the decode of one 32-element
// unit into signed bytes with a multiplier per half (cuda_quant.cuh's Unit):
//   IQ2_*, IQ3_*: byte = the signed grid value, d = block d times the type's factor
//   IQ1_*:        byte = 8 * grid value + delta sign (-9..9), d = block d / 8
// so a unit's value is (sc0 * p0 + sc1 * p1) * (d * dx) with sc = 2s + 1, exact in
// the integers (quant/quant_grids.h gives the layouts).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace moe::cuda::grid {

static __device__ const uint64_t kIq2xxs[256] = {
#include "quant/grids/iq2xxs.inc"
};
static __device__ const uint64_t kIq2xs[512] = {
#include "quant/grids/iq2xs.inc"
};
static __device__ const uint64_t kIq2s[1024] = {
#include "quant/grids/iq2s.inc"
};
static __device__ const uint32_t kIq3xxs[256] = {
#include "quant/grids/iq3xxs.inc"
};
static __device__ const uint32_t kIq3s[512] = {
#include "quant/grids/iq3s.inc"
};
static __device__ const uint64_t kIq1s[2048] = {
#include "quant/grids/iq1s.inc"
};

__device__ __forceinline__ uint32_t loadU16(const uint8_t* p) {
  return static_cast<uint32_t>(*reinterpret_cast<const uint16_t*>(p));
}

// The 8 sign bits of a 7-bit sign index: an even number of minus signs.
__device__ __forceinline__ uint32_t signBits(uint32_t index7) {
  uint32_t i = index7 & 127u, parity = i;
  parity ^= parity >> 4;
  parity ^= parity >> 2;
  parity ^= parity >> 1;
  return i | ((parity & 1u) << 7);
}

// Two words (8 bytes) of unsigned magnitudes with the sign bits applied.
__device__ __forceinline__ void signedWords(uint64_t magnitudes, uint32_t signs, int* v) {
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int e = 4 * w + j;
      const int m = static_cast<int>((magnitudes >> (8 * e)) & 0xffu);
      const int value = (signs >> e) & 1u ? -m : m;
      word |= (static_cast<uint32_t>(value) & 0xffu) << (8 * j);
    }
    v[w] = static_cast<int>(word);
  }
}

// Two words of an IQ1 group: 8 * g + delta per byte, g in -1..1.
__device__ __forceinline__ void iq1Words(uint64_t entry, int delta, int* v) {
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    uint32_t word = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int g = static_cast<int8_t>(static_cast<uint8_t>(entry >> (8 * (4 * w + j))));
      word |= (static_cast<uint32_t>(8 * g + delta) & 0xffu) << (8 * j);
    }
    v[w] = static_cast<int>(word);
  }
}

}  // namespace moe::cuda::grid
