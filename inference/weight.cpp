#include "inference/weight.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "quant/quant.h"
#include "quant/quant_repack.h"

namespace moe {

WeightView sliceRows(const WeightView& w, int64_t first, int64_t count) {
  if (first < 0 || count < 0 || first + count > w.rows)
    throw std::out_of_range("sliceRows: rows [" + std::to_string(first) + ", " +
                            std::to_string(first + count) + ") of " + std::to_string(w.rows));
  WeightView s = w;
  s.rows = count;
  if (!w.interleaved()) {
    s.data = w.data + static_cast<size_t>(first) * w.row_bytes;
    return s;
  }
  if (first % quant::kRowGroup || count % quant::kRowGroup)
    throw std::invalid_argument("sliceRows: an interleaved weight splits only at groups of " +
                                std::to_string(quant::kRowGroup) + " rows");
  s.data = w.data + static_cast<size_t>(first / quant::kRowGroup) * w.group_bytes;
  return s;
}

void dequantizeWeightRow(const WeightView& w, int64_t r, float* out) {
  if (r < 0 || r >= w.rows)
    throw std::out_of_range("dequantizeWeightRow: row " + std::to_string(r) + " of " +
                            std::to_string(w.rows));
  if (!w.interleaved()) {
    quant::dequantizeRow(w.type, w.data + static_cast<size_t>(r) * w.row_bytes, out, w.cols);
    return;
  }
  thread_local std::vector<uint8_t> row;
  if (row.size() < w.row_bytes) row.resize(w.row_bytes);
  quant::unpackRow(w.type, w.data + static_cast<size_t>(r / quant::kRowGroup) * w.group_bytes, w.cols,
                   static_cast<int>(r % quant::kRowGroup), row.data());
  quant::dequantizeRow(w.type, row.data(), out, w.cols);
}

}  // namespace moe
