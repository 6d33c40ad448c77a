// A weight matrix as the file stores it: `rows` rows of `cols` elements, each row
// row_bytes long, in the file's element type (no conversion at load).
#pragma once

#include <cstddef>
#include <cstdint>

#include "models/gguf.h"

namespace moe {

struct WeightView {
  gguf::TensorType type = gguf::TensorType::F32;
  const uint8_t* data = nullptr;  // backend memory (host memory for the CPU backend)
  int64_t cols = 0;               // ne0: input width
  int64_t rows = 0;               // ne1: output width
  size_t row_bytes = 0;

  bool empty() const { return data == nullptr; }
  size_t bytes() const { return row_bytes * static_cast<size_t>(rows); }
};

}  // namespace moe
