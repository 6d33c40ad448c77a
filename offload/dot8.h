// A float dot product with 8 independent partial sums: the compiler keeps them in
// vector registers (one running sum is a serial dependency it may not reorder), so
// it runs several times faster than std::inner_product. The summation order is
// fixed, so results are deterministic. Used by the predictors, which run once per
// MoE layer and token and must stay cheap beside the forward pass.
#pragma once

namespace moe {

inline float dot8(const float* a, const float* b, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  float s = 0;
  for (; i < n; ++i) s += a[i] * b[i];
  return s + ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace moe
