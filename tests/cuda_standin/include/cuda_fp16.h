// The CUDA stand-in's cuda_fp16.h: IEEE 754 binary16 as 16 bits, with the
// conversions the project's kernels use (exact to float; float to half rounds
// to nearest even, as __float2half does).
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda_runtime.h"

struct __half {
  unsigned short bits;
};

inline __half __ushort_as_half(unsigned short bits) { return __half{bits}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }

inline float __half2float(__half h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1fu;
  uint32_t mantissa = h.bits & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1fu) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // infinity or NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);  // normal: rebias 15 -> 127
  } else if (mantissa == 0) {
    bits = sign;  // signed zero
  } else {        // subnormal: normalise
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return __uint_as_float(bits);
}

inline __half __float2half(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // infinity, NaN (kept quiet)
    return __half{static_cast<unsigned short>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u))};
  if (abs >= 0x477ff000u) return __half{static_cast<unsigned short>(sign | 0x7c00u)};  // rounds above 65504
  if (abs < 0x38800000u) {  // below the smallest normal half: m * 2^-24 with m < 1024 (or zero)
    const uint32_t exponent = abs >> 23;
    if (exponent < 101) return __half{sign};  // under half of the smallest subnormal
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t dropped = 126 - exponent;  // 14 .. 25
    const uint32_t kept = mant >> dropped, rem = mant & ((1u << dropped) - 1), half_way = 1u << (dropped - 1);
    const uint32_t rounded = kept + ((rem > half_way || (rem == half_way && (kept & 1u))) ? 1u : 0u);
    return __half{static_cast<unsigned short>(sign | rounded)};  // 1024 is the smallest normal
  }
  const uint32_t rebased = abs - 0x38000000u;  // exponent 127 -> 15
  const uint32_t kept = rebased >> 13, rem = rebased & 0x1fffu;
  const uint32_t rounded = kept + ((rem > 0x1000u || (rem == 0x1000u && (kept & 1u))) ? 1u : 0u);
  return __half{static_cast<unsigned short>(sign | rounded)};
}
inline __half __float2half_rn(float f) { return __float2half(f); }
