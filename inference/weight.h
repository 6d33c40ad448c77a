// A weight matrix: `rows` rows of `cols` elements in the file's element type (no
// conversion at load), either as the file lays them out (each row row_bytes long)
// or, where a CPU backend repacked them, in quant_repack.h's interleaved groups of
// kRowGroup rows (group_bytes each).
#pragma once

#include <cstddef>
#include <cstdint>

#include "models/gguf.h"
#include "quant/quant_repack.h"

namespace moe {

struct WeightView {
  gguf::TensorType type = gguf::TensorType::F32;
  const uint8_t* data = nullptr;  // backend memory (host memory for the CPU backend)
  int64_t cols = 0;               // ne0: input width
  int64_t rows = 0;               // ne1: output width
  size_t row_bytes = 0;           // of a row in the file layout
  size_t group_bytes = 0;         // > 0: interleaved groups of kRowGroup rows

  bool empty() const { return data == nullptr; }
  bool interleaved() const { return group_bytes != 0; }
  size_t bytes() const {
    const auto n = static_cast<size_t>(rows);
    return interleaved() ? group_bytes * (n / quant::kRowGroup) : row_bytes * n;
  }
};

// Rows [first, first + count) of w (of an interleaved weight: whole groups).
WeightView sliceRows(const WeightView& w, int64_t first, int64_t count);

// Row r of w as floats: out[0..cols).
void dequantizeWeightRow(const WeightView& w, int64_t r, float* out);

}  // namespace moe
