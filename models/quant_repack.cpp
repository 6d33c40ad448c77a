#include "models/quant_repack.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "models/quant_layout.h"

namespace moe::quant {
namespace {

using gguf::TensorType;
using namespace layout;

constexpr size_t kQ4_0GroupBytes = 16 + 128;
constexpr size_t kQ4_KGroupBytes = 16 + 16 + 64 + 64 + 1024;

// The one table of where a file block's bytes go in a group block. Calls
// move(group_offset, row_offset, bytes) for every run of row r's block; the
// Q4_K scales, stored unpacked, are left to the caller.
template <class Move>
void forEachRun(TensorType t, int r, Move move) {
  if (t == TensorType::Q4_0) {
    move(size_t(2 * r), size_t{0}, size_t{2});
    for (int c = 0; c < 4; ++c) move(size_t(16 + 32 * c + 4 * r), size_t(2 + 4 * c), size_t{4});
    return;
  }
  move(size_t(2 * r), size_t{0}, size_t{2});
  move(size_t(16 + 2 * r), size_t{2}, size_t{2});
  for (int k = 0; k < 4; ++k)
    for (int c = 0; c < 8; ++c)
      move(size_t(160 + 256 * k + 32 * c + 4 * r), size_t(16 + 32 * k + 4 * c), size_t{4});
}

size_t fileBlockBytes(TensorType t) { return t == TensorType::Q4_0 ? kQ4_0Bytes : kQ4_KBytes; }
size_t groupBlockBytes(TensorType t) { return t == TensorType::Q4_0 ? kQ4_0GroupBytes : kQ4_KGroupBytes; }

void checkRepackable(TensorType t, int64_t cols, const char* what) {
  if (!isRepackable(t))
    throw std::invalid_argument(std::string("quant: ") + what + ": " + gguf::tensorTypeName(t) +
                                " has no interleaved layout");
  checkLength(t, cols, what);
}

}  // namespace

bool isRepackable(TensorType t) { return t == TensorType::Q4_0 || t == TensorType::Q4_K; }

size_t repackedGroupBytes(TensorType t, int64_t cols) {
  checkRepackable(t, cols, "repackedGroupBytes");
  return static_cast<size_t>(cols / blockElems(t)) * groupBlockBytes(t);
}

void repackRows(TensorType t, const uint8_t* rows, size_t row_bytes, int64_t cols, uint8_t* group) {
  checkRepackable(t, cols, "repackRows");
  const int64_t nb = cols / blockElems(t);
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* gb = group + b * groupBlockBytes(t);
    for (int r = 0; r < kRowGroup; ++r) {
      const uint8_t* fb = rows + r * row_bytes + b * fileBlockBytes(t);
      forEachRun(t, r, [&](size_t g, size_t f, size_t n) { std::memcpy(gb + g, fb + f, n); });
      if (t == TensorType::Q4_K)
        for (int j = 0; j < kSubBlocks; ++j) {
          int sc = 0, m = 0;
          scaleMinK4(fb + 4, j, sc, m);
          gb[32 + 8 * j + r] = static_cast<uint8_t>(sc);
          gb[96 + 16 * (j / 2) + 2 * r + (j % 2)] = static_cast<uint8_t>(m);
        }
    }
  }
}

void unpackRow(TensorType t, const uint8_t* group, int64_t cols, int r, uint8_t* row) {
  checkRepackable(t, cols, "unpackRow");
  if (r < 0 || r >= kRowGroup) throw std::out_of_range("quant: unpackRow: row " + std::to_string(r));
  const int64_t nb = cols / blockElems(t);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* gb = group + b * groupBlockBytes(t);
    uint8_t* fb = row + b * fileBlockBytes(t);
    forEachRun(t, r, [&](size_t g, size_t f, size_t n) { std::memcpy(fb + f, gb + g, n); });
    if (t == TensorType::Q4_K) {
      int sc[kSubBlocks], m[kSubBlocks];
      for (int j = 0; j < kSubBlocks; ++j) {
        sc[j] = gb[32 + 8 * j + r];
        m[j] = gb[96 + 16 * (j / 2) + 2 * r + (j % 2)];
      }
      packScaleMinK4(sc, m, fb + 4);
    }
  }
}

}  // namespace moe::quant
