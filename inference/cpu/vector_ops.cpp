#include "inference/cpu/vector_ops.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace moe::vec {

void addScaled(float* y, const float* x, float a, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  const __m128 va = _mm_set1_ps(a);
  for (; i + 16 <= n; i += 16)
    for (size_t k = i; k < i + 16; k += 4)
      _mm_storeu_ps(y + k, _mm_add_ps(_mm_loadu_ps(y + k), _mm_mul_ps(va, _mm_loadu_ps(x + k))));
#endif
  for (; i < n; ++i) y[i] = y[i] + a * x[i];
}

void add(float* y, const float* x, size_t n) {
  size_t i = 0;
#if defined(__SSE2__)
  for (; i + 16 <= n; i += 16)
    for (size_t k = i; k < i + 16; k += 4)
      _mm_storeu_ps(y + k, _mm_add_ps(_mm_loadu_ps(y + k), _mm_loadu_ps(x + k)));
#endif
  for (; i < n; ++i) y[i] = y[i] + x[i];
}

}  // namespace moe::vec
