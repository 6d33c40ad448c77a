// Element-wise float loops of the CPU backend, written out in SIMD where the
// compiler would leave them scalar. Every element gets the same operations, in the
// same order, as the plain loop in the comment: the results are bit for bit those
// of that loop on any machine.
#pragma once

#include <cstddef>

namespace moe::vec {

// y[i] = y[i] + a * x[i]  (a product, then a sum: two roundings)
void addScaled(float* y, const float* x, float a, size_t n);

// y[i] = y[i] + x[i]
void add(float* y, const float* x, size_t n);

}  // namespace moe::vec
