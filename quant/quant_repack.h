// Interleaved row groups: a CPU-side layout of Q8_0, Q4_0 and K-quant weights in which
// eight consecutive rows are stored block by block side by side, so one 256-bit
// register holds four weights of each of the eight rows (Q8_0: one 512-bit register
// eight of each) and their scales sit in one vector.
// The dot kernels (quant_dot.h dotGroups) then keep one accumulator lane per row:
// an activation load serves eight rows, and a block's scaling is one vector fma for
// eight rows instead of eight. The sums are those quant_dot.h defines for the file
// layout, so a repacked weight gives the same bits as the file's.
//
// Group layouts (per block of the row length; r = row 0..7 of the group):
//   Q8_0, 272 bytes per 32 elements (the file's 8 * 34):
//     [0, 16)    f16 d of row r at 2r
//     [16, 272)  run j = 0..3 at 16 + 64j: row r's quant bytes 8j..8j+7 at + 8r
//                (so int32 lane 2r + k of the run holds row r's elements
//                8j+4k..8j+4k+3: quant_dot.h's lane 2j + k of that row)
//   Q4_0, 144 bytes per 32 elements:
//     [0, 16)    f16 d of row r at 2r
//     [16, 144)  chunk c = 0..3 at 16 + 32c: row r's quant bytes 4c..4c+3 at + 4r
//                (low nibbles: elements 4c..4c+3, high: elements 16+4c..16+4c+3)
//   Q4_K, 1184 bytes per 256 elements (file: 8 * 144; the scales are unpacked):
//     [0, 16)     f16 d of row r at 2r;  [16, 32) f16 dmin
//     [32, 96)    six-bit scale of sub-block j, row r at 32 + 8j + r
//     [96, 160)   six-bit mins of sub-blocks 2p, 2p+1, row r at 96 + 16p + 2r (+1)
//     [160, 1184) for each 32-byte quant run k = 0..3 (sub-blocks 2k low nibbles,
//                 2k+1 high), chunk c = 0..7 at 160 + 256k + 32c: row r's bytes
//                 32k+4c..32k+4c+3 at + 4r
//   Q5_K, 1440 bytes per 256 elements (file: 8 * 176): Q4_K's fields, with the
//   fifth bits before the quant runs (the kernel reads them with run 0):
//     [0, 160)     as Q4_K
//     [160, 416)   the fifth bits: chunk c = 0..7 at 160 + 32c: row r's qh bytes
//                  4c..4c+3 at + 4r (bit j of qh byte i: element 32j + i)
//     [416, 1440)  Q4_K's quant runs (at 416 + 256k + 32c)
//   Q6_K, 1680 bytes per 256 elements (file: 8 * 210), in the order the kernel
//   reads it:
//     [0, 16)      f16 d of row r at 2r
//     [16, 144)    int8 scale s = 0..15 (elements 16s..16s+15), row r at 16 + 8s + r
//     [144, 1680)  for each half h = 0..1 and chunk c = 0..7, 96 bytes at
//                  144 + 768h + 96c: row r's ql bytes 64h+4c..+3 at + 4r (low
//                  nibbles: sub-block 4h, high: 4h + 2), its ql bytes 64h+32+4c..+3
//                  at + 32 + 4r (sub-blocks 4h + 1, 4h + 3), its qh bytes
//                  128+32h+4c..+3 at + 64 + 4r (bits 2g, 2g + 1: sub-block 4h + g)
#pragma once

#include <cstddef>
#include <cstdint>

#include "models/gguf.h"

namespace moe::quant {

inline constexpr int kRowGroup = 8;

// Whether `t` has an interleaved layout.
bool isRepackable(gguf::TensorType t);

// Bytes of one group of kRowGroup rows of `cols` elements (a whole number of blocks).
size_t repackedGroupBytes(gguf::TensorType t, int64_t cols);

// kRowGroup rows in the file layout, row_bytes apart -> one group.
void repackRows(gguf::TensorType t, const uint8_t* rows, size_t row_bytes, int64_t cols, uint8_t* group);

// Row r of a group back in the file layout (gguf::rowBytes(t, cols) bytes): the
// exact inverse of repackRows.
void unpackRow(gguf::TensorType t, const uint8_t* group, int64_t cols, int r, uint8_t* row);

}  // namespace moe::quant
