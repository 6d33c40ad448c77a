#include "quant/quant_repack.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "quant/quant_layout.h"

namespace moe::quant {
namespace {

using gguf::TensorType;
using namespace layout;

constexpr size_t kQ8_0GroupBytes = 16 + 256;
constexpr size_t kQ4_0GroupBytes = 16 + 128;
constexpr size_t kQ4_KGroupBytes = 16 + 16 + 64 + 64 + 1024;
constexpr size_t kQ5_KGroupBytes = kQ4_KGroupBytes + 256;
constexpr size_t kQ6_KGroupBytes = 16 + 128 + 1024 + 512;

// The one table of where a file block's bytes go in a group block. Calls
// move(group_offset, row_offset, bytes) for every run of row r's block; the
// Q4_K/Q5_K scales, stored unpacked, are left to the caller.
template <class Move>
void forEachRun(TensorType t, int r, Move move) {
  switch (t) {
    case TensorType::Q8_0:
      move(size_t(2 * r), size_t{0}, size_t{2});
      for (int j = 0; j < 4; ++j) move(size_t(16 + 64 * j + 8 * r), size_t(2 + 8 * j), size_t{8});
      return;
    case TensorType::Q4_0:
      move(size_t(2 * r), size_t{0}, size_t{2});
      for (int c = 0; c < 4; ++c) move(size_t(16 + 32 * c + 4 * r), size_t(2 + 4 * c), size_t{4});
      return;
    case TensorType::Q6_K:  // file: ql[128], qh[64], scales[16], d
      move(size_t(2 * r), size_t{208}, size_t{2});
      for (int s = 0; s < 16; ++s) move(size_t(16 + 8 * s + r), size_t(192 + s), size_t{1});
      for (int h = 0; h < 2; ++h)
        for (int c = 0; c < 8; ++c) {
          const size_t at = size_t(144 + 768 * h + 96 * c + 4 * r);
          move(at, size_t(64 * h + 4 * c), size_t{4});
          move(at + 32, size_t(64 * h + 32 + 4 * c), size_t{4});
          move(at + 64, size_t(128 + 32 * h + 4 * c), size_t{4});
        }
      return;
    default: {  // Q4_K, Q5_K: file d, dmin, scales[12], (Q5_K: qh[32]), qs[128]
      const bool five = t == TensorType::Q5_K;
      move(size_t(2 * r), size_t{0}, size_t{2});
      move(size_t(16 + 2 * r), size_t{2}, size_t{2});
      const int qs = five ? 416 : 160;  // Q5_K: the fifth bits first, read with run 0
      for (int k = 0; k < 4; ++k)
        for (int c = 0; c < 8; ++c)
          move(size_t(qs + 256 * k + 32 * c + 4 * r), size_t((five ? 48 : 16) + 32 * k + 4 * c), size_t{4});
      if (five)
        for (int c = 0; c < 8; ++c) move(size_t(160 + 32 * c + 4 * r), size_t(16 + 4 * c), size_t{4});
      return;
    }
  }
}

size_t fileBlockBytes(TensorType t) {
  switch (t) {
    case TensorType::Q8_0: return kQ8_0Bytes;
    case TensorType::Q4_0: return kQ4_0Bytes;
    case TensorType::Q5_K: return kQ5_KBytes;
    case TensorType::Q6_K: return kQ6_KBytes;
    default: return kQ4_KBytes;
  }
}
size_t groupBlockBytes(TensorType t) {
  switch (t) {
    case TensorType::Q8_0: return kQ8_0GroupBytes;
    case TensorType::Q4_0: return kQ4_0GroupBytes;
    case TensorType::Q5_K: return kQ5_KGroupBytes;
    case TensorType::Q6_K: return kQ6_KGroupBytes;
    default: return kQ4_KGroupBytes;
  }
}

bool hasPackedScales(TensorType t) { return t == TensorType::Q4_K || t == TensorType::Q5_K; }

void checkRepackable(TensorType t, int64_t cols, const char* what) {
  if (!isRepackable(t))
    throw std::invalid_argument(std::string("quant: ") + what + ": " + gguf::tensorTypeName(t) +
                                " has no interleaved layout");
  checkLength(t, cols, what);
}

}  // namespace

bool isRepackable(TensorType t) {
  switch (t) {
    case TensorType::Q8_0:
    case TensorType::Q4_0:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q6_K: return true;
    default: return false;
  }
}

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
      if (hasPackedScales(t))
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
    if (hasPackedScales(t)) {
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
