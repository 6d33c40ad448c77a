// Internal to models/: what the per-instruction-set dot kernels share (quant_dot.h
// defines the arithmetic they all follow).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "quant/quant_dot.h"
#include "quant/quant_layout.h"

namespace moe::quant::dot {

using gguf::TensorType;

// One tile's operands: a weight row and T activations.
struct TileArgs {
  const uint8_t* row;  // runTiles steps it by row_bytes
  size_t row_bytes;
  const uint8_t* act;  // [T] activation rows of act_stride bytes
  size_t act_stride;
  int64_t n;  // elements per row
  float* y;   // y[t * y_stride]: the row's result for activation t
  size_t y_stride;
};

using TileFn = void (*)(const TileArgs&);

// Kernels of one type for one row and T activations, T in {1, 2, 4, 8}: fn[log2 T].
// Rows go one at a time: consecutive rows are adjacent in memory, so the weights
// stream from RAM as one sequential read, and a row's blocks are unpacked once for T
// activations. (Tiles of 2 or 4 rows read as many short interleaved streams, which
// measured at a third to a half of the sequential rate on this project's VM; with
// the row's weights in L1 and the activations in L2, one row by eight activations
// computed as fast as four by four.)
struct TileTable {
  TileFn fn[4];
};

// Covers nr x nt: every row with the activations in eights, then a four, two, one.
inline void runTiles(const TileTable& table, TileArgs a, int nr, int nt) {
  for (int r = 0; r < nr; ++r) {
    TileArgs ra = a;
    ra.row = a.row + static_cast<size_t>(r) * a.row_bytes;
    ra.y = a.y + r;
    for (int t0 = 0; t0 < nt;) {
      const int left = nt - t0;
      const int tl = left >= 8 ? 3 : left >= 4 ? 2 : left >= 2 ? 1 : 0;
      TileArgs ta = ra;
      ta.act = a.act + static_cast<size_t>(t0) * a.act_stride;
      ta.y = ra.y + static_cast<size_t>(t0) * a.y_stride;
      table.fn[tl](ta);
      t0 += 1 << tl;
    }
  }
}

// The table of a kernel template K<W, T>::run.
template <template <class, int> class K, class W>
struct TableOf {
  static constexpr TileTable value = {{K<W, 1>::run, K<W, 2>::run, K<W, 4>::run, K<W, 8>::run}};
};

// Operands of one interleaved group (quant_repack.h) and T activations.
struct GroupArgs {
  const uint8_t* group;
  const uint8_t* act;  // [T] activation rows of act_stride bytes
  size_t act_stride;
  int64_t n;  // elements per row
  float* y;   // y[t * y_stride + r]: row r of the group, activation t
  size_t y_stride;
};

using GroupFn = void (*)(const GroupArgs&);

// Kernels of one type for a group and T activations, T in {1, 2, 4, 8}: fn[log2 T],
// null where an instruction set has no registers for that many.
struct GroupTable {
  GroupFn fn[4];
};

// Covers ngroups x nt with the largest tiles the table has.
inline void runGroups(const GroupTable& table, GroupArgs a, size_t group_bytes, int ngroups, int nt) {
  for (int g = 0; g < ngroups; ++g) {
    GroupArgs ga = a;
    ga.group = a.group + static_cast<size_t>(g) * group_bytes;
    for (int t0 = 0; t0 < nt;) {
      int tl = 3;
      while (tl > 0 && (!table.fn[tl] || (1 << tl) > nt - t0)) --tl;
      GroupArgs ta = ga;
      ta.act = a.act + static_cast<size_t>(t0) * a.act_stride;
      ta.y = a.y + static_cast<size_t>(t0) * a.y_stride + 8 * static_cast<size_t>(g);
      table.fn[tl](ta);
      t0 += 1 << tl;
    }
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

inline int32_t loadI32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A Q8_0 activation row's per-block d as f32 and sum of q (quant_dot.h).
inline const uint8_t* q8_0Scales(const uint8_t* act, int64_t nb) { return act + nb * kQ8_0ActBytes; }
inline const uint8_t* q8_0Sums(const uint8_t* act, int64_t nb) { return act + nb * (kQ8_0ActBytes + 4); }

// Q8_K activation block fields.
inline float q8kScale(const uint8_t* blk) { return loadF32(blk); }
inline const int8_t* q8kQuants(const uint8_t* blk) { return reinterpret_cast<const int8_t*>(blk + 4); }
inline const uint8_t* q8kSums(const uint8_t* blk) { return blk + 260; }  // int16 [16]

// One (row, activation) pair on the portable kernels (quant_dot_portable.cpp).
float pairPortable(TensorType t, const uint8_t* row, const uint8_t* act, int64_t n);

// Tables per type; null where the instruction set is absent from this build.
const TileTable* portableTable(TensorType t);
const TileTable* avx2Table(TensorType t);
// The AVX2 kernels of the types in blocks of 32 (quant_dot_avx2_blocks32.cpp); null for others.
const TileTable* avx2Blocks32Table(TensorType t);
const TileTable* avx512Table(TensorType t);
const GroupTable* portableGroupTable(TensorType t);
const GroupTable* avx2GroupTable(TensorType t);
const GroupTable* avx512GroupTable(TensorType t);
bool cpuHasAvx2();
// The AVX2 activation quantisers: the portable ones' bytes, whole rows (tails included).
void quantizeQ8_0Avx2(const float* x, int64_t nb, uint8_t* dst);
void quantizeQ8_KAvx2(const float* x, int64_t nb, uint8_t* dst);
bool cpuHasAvx512();

}  // namespace moe::quant::dot
