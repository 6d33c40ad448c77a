// Internal to the CPU backend: per-thread scratch buffers.
#pragma once

#include <cstddef>
#include <vector>

namespace moe::cpu {

// A per-thread scratch buffer that only grows (the pool's threads live as long as
// the backend, so each keeps one buffer).
inline float* scratch(std::vector<float>& buf, size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace moe::cpu
