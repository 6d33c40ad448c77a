// One token's step of the gated delta rule over the rows of one value head's state
// (deltanet::deltaRule's inner loop), vectorised. For each row i of S (hk floats):
//   row *= decay;  sk = row . k;  delta = (v[i] - sk) * b;  row += k delta;  out[i] = row . q
// Both dot products sum over 16 lanes (lane l takes the elements j with j % 16 == l,
// each a fused multiply-add), then add the lanes 0..15 in order; the row update is a
// fused multiply-add too. Every instruction set follows that order, so the portable,
// AVX2 and AVX-512 kernels give the same bits.
#pragma once

#include "quant/quant_dot.h"

namespace moe::deltanet {

struct DeltaRowsStep {
  float* state = nullptr;  // [n_rows][hk], updated
  int n_rows = 0, hk = 0;
  const float* k = nullptr;  // [hk], L2-normalised
  const float* q = nullptr;  // [hk], normalised and scaled
  const float* v = nullptr;  // [n_rows]
  float decay = 1, beta = 0;
  float* out = nullptr;  // [n_rows]
};

void deltaRows(quant::DotIsa isa, const DeltaRowsStep& s);
// With the best instruction set the CPU has (quant::bestDotIsa).
void deltaRows(const DeltaRowsStep& s);

}  // namespace moe::deltanet
