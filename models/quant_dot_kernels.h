// Internal to models/: what the per-instruction-set dot kernels share (quant_dot.h
// defines the arithmetic they all follow).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "models/quant_dot.h"
#include "models/quant_layout.h"

namespace moe::quant::dot {

using gguf::TensorType;

// One tile's operands; kernels read rows r < R and activations t < T from here.
struct TileArgs {
  const uint8_t* rows;  // [R] rows of row_bytes
  size_t row_bytes;
  const uint8_t* act;  // [T] activation rows of act_stride bytes
  size_t act_stride;
  int64_t n;  // elements per row
  float* y;   // y[t * y_stride + r]
  size_t y_stride;
};

using TileFn = void (*)(const TileArgs&);

// Kernels of one type for R rows x T activations, R and T in {1, 2, 4}:
// fn[log2 R][log2 T].
struct TileTable {
  TileFn fn[3][3];
};

// Covers nr x nt with the table's tiles: rows in fours, then a two and a one;
// activations likewise. A single activation takes rows one at a time:
// consecutive rows are adjacent in memory, so the weights stream from RAM as one
// sequential read (four rows at once read four short interleaved streams, which
// measured at half the bandwidth).
inline void runTiles(const TileTable& table, TileArgs a, int nr, int nt) {
  for (int r0 = 0; r0 < nr;) {
    const int left = nr - r0;
    const int rl = nt == 1 ? 0 : left >= 4 ? 2 : left >= 2 ? 1 : 0;
    TileArgs ra = a;
    ra.rows = a.rows + static_cast<size_t>(r0) * a.row_bytes;
    ra.y = a.y + r0;
    for (int t0 = 0; t0 < nt;) {
      const int tleft = nt - t0;
      const int tl = tleft >= 4 ? 2 : tleft >= 2 ? 1 : 0;
      TileArgs ta = ra;
      ta.act = a.act + static_cast<size_t>(t0) * a.act_stride;
      ta.y = ra.y + static_cast<size_t>(t0) * a.y_stride;
      table.fn[rl][tl](ta);
      t0 += 1 << tl;
    }
    r0 += 1 << rl;
  }
}

inline float loadF32(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, sizeof f);
  return f;
}

inline int16_t loadI16(const uint8_t* p) {
  int16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The fixed reduction order of quant_dot.h.
inline float reduceLanes(const float* acc) {  // acc: [8]
  return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// Q8_K activation block fields.
inline float q8kScale(const uint8_t* blk) { return loadF32(blk); }
inline const int8_t* q8kQuants(const uint8_t* blk) { return reinterpret_cast<const int8_t*>(blk + 4); }
inline const uint8_t* q8kSums(const uint8_t* blk) { return blk + 260; }  // int16 [16]

// The full table of a kernel template K<W, R, T>::run. Tiles of more than
// kMaxPairs (row, activation) pairs run as two tiles of half the rows, so a
// kernel's accumulators fit its instruction set's registers.
template <template <class, int, int> class K, class W, int kMaxPairs>
struct TableOf {
  template <int R, int T>
  static void run(const TileArgs& a) {
    if constexpr (R * T > kMaxPairs) {
      run<R / 2, T>(a);
      TileArgs b = a;
      b.rows += (R / 2) * a.row_bytes;
      b.y += R / 2;
      run<R / 2, T>(b);
    } else {
      K<W, R, T>::run(a);
    }
  }
  static constexpr TileTable value = {{{run<1, 1>, run<1, 2>, run<1, 4>},
                                       {run<2, 1>, run<2, 2>, run<2, 4>},
                                       {run<4, 1>, run<4, 2>, run<4, 4>}}};
};

// Tables per type; null where the instruction set is absent from this build.
const TileTable* portableTable(TensorType t);
const TileTable* avx2Table(TensorType t);
const TileTable* avx512Table(TensorType t);
bool cpuHasAvx2();
bool cpuHasAvx512();

}  // namespace moe::quant::dot
