#include "models/gguf.h"

namespace moe::gguf {

uint64_t GgufWriter::dataSectionBytes() const {
  uint64_t total = 0;
  for (const auto& t : tensors_) {
    const uint64_t n = t.fill ? t.nbytes : t.bytes.size();
    total += (n + alignment_ - 1) / alignment_ * alignment_;
  }
  return total;
}

}  // namespace moe::gguf
