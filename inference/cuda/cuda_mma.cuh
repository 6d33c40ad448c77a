// The int8 tensor-core instructions the quantised GEMM uses: c += A * B for a
// 16 x K tile of signed bytes A and a K x 8 tile B, one warp together
// (mma.sync.aligned.m16n8k{16,32}.row.col.s32.s8.s8.s32, compute capability 8.0
// and later: kMinMmaComputeCapability). Fragments as the PTX ISA lays them out, with g = lane / 4 and
// t = lane % 4, four consecutive k per 32-bit register:
//   A: register i holds row g + 8 * (i % 2), columns 16 * (i / 2) + 4t .. 4t + 3;
//   B: register i holds column g, rows 16 * i + 4t .. 4t + 3;
//   C: c[i] is row g + 8 * (i / 2), column 2t + i % 2.
// On the CUDA stand-in the warp's registers meet in a table and each lane computes
// its four sums (tests/cuda_standin/include/cuda_standin_device.h).
#pragma once

#include <cuda_runtime.h>

namespace moe::cuda {

__device__ __forceinline__ void mmaS8K32(int (&c)[4], const int (&a)[4], const int (&b)[2]) {
#if MOECHAT_CUDA_STANDIN
  ::cudastandin::mmaSyncS8<32>(c, a, b);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  (void)c, (void)a, (void)b;
#if defined(__CUDA_ARCH__)
  __trap();  // never launched below compute capability 8.0
#endif
#endif
}

__device__ __forceinline__ void mmaS8K16(int (&c)[4], const int (&a)[2], const int (&b)[1]) {
#if MOECHAT_CUDA_STANDIN
  ::cudastandin::mmaSyncS8<16>(c, a, b);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(b[0]));
#else
  (void)c, (void)a, (void)b;
#if defined(__CUDA_ARCH__)
  __trap();
#endif
#endif
}

}  // namespace moe::cuda
