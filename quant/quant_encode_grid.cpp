// The reference quantiser of the grid-coded IQ types (quant_grids.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "quant/quant.h"
#include "quant/quant_grids.h"
#include "quant/quant_layout.h"

namespace moe::quant::grids {
namespace {

using gguf::TensorType;
using layout::storeU16;

// A lattice table split into halves: each entry is a pair (lo, hi) of half-patterns
// (4 values for the 8-wide grids, 2 for the 4-wide), and the distinct half-patterns
// are few (at most 81 over three levels, 64 over eight), so a search scores each
// half-pattern once and then every entry with one addition.
struct Lattice {
  int width = 8;
  std::vector<std::array<float, 4>> halves;  // the distinct half-patterns
  std::vector<uint8_t> lo, hi;               // per entry: its two half-patterns
  float max = 0.0f;
  int entries() const { return static_cast<int>(lo.size()); }
};

template <class Entry>
Lattice makeLattice(const Entry* table, int count, int width, bool is_signed) {
  Lattice lat;
  lat.width = width;
  const int half = width / 2;
  auto halfIndex = [&](const std::array<float, 4>& h) {
    for (size_t i = 0; i < lat.halves.size(); ++i)
      if (lat.halves[i] == h) return static_cast<uint8_t>(i);
    lat.halves.push_back(h);
    return static_cast<uint8_t>(lat.halves.size() - 1);
  };
  for (int e = 0; e < count; ++e) {
    std::array<float, 4> parts[2] = {};
    for (int j = 0; j < width; ++j) {
      const auto byte = static_cast<uint8_t>(static_cast<uint64_t>(table[e]) >> (8 * j));
      const float v = is_signed ? static_cast<float>(static_cast<int8_t>(byte)) : static_cast<float>(byte);
      parts[j / half][j % half] = v;
      lat.max = std::max(lat.max, std::fabs(v));
    }
    lat.lo.push_back(halfIndex(parts[0]));
    lat.hi.push_back(halfIndex(parts[1]));
  }
  return lat;
}

const Lattice& latticeOf(TensorType t) {
  static const Lattice iq2xxs = makeLattice(kIq2xxsGrid, 256, 8, false);
  static const Lattice iq2xs = makeLattice(kIq2xsGrid, 512, 8, false);
  static const Lattice iq2s = makeLattice(kIq2sGrid, 1024, 8, false);
  static const Lattice iq3xxs = makeLattice(kIq3xxsGrid, 256, 4, false);
  static const Lattice iq3s = makeLattice(kIq3sGrid, 512, 4, false);
  static const Lattice iq1s = makeLattice(kIq1sGrid, 2048, 8, true);
  switch (t) {
    case TensorType::IQ2_XXS: return iq2xxs;
    case TensorType::IQ2_XS: return iq2xs;
    case TensorType::IQ2_S: return iq2s;
    case TensorType::IQ3_XXS: return iq3xxs;
    case TensorType::IQ3_S: return iq3s;
    default: return iq1s;
  }
}

// The entry nearest target[0..width) (least squares; the first of equals), with offset
// added to every value.
int nearest(const Lattice& lat, const float* target, float offset, float* err) {
  const int half = lat.width / 2;
  float score[2][256];
  for (int side = 0; side < 2; ++side) {
    for (size_t p = 0; p < lat.halves.size(); ++p) {
      float sum = 0.0f;
      for (int j = 0; j < half; ++j) {
        const float diff = target[side * half + j] - (lat.halves[p][j] + offset);
        sum += diff * diff;
      }
      score[side][p] = sum;
    }
  }
  int best = 0;
  float best_err = std::numeric_limits<float>::max();
  for (int e = 0; e < lat.entries(); ++e) {
    const float d = score[0][lat.lo[e]] + score[1][lat.hi[e]];
    if (d < best_err) best_err = d, best = e;
  }
  *err = best_err;
  return best;
}

bool isIq1(TensorType t) { return t == TensorType::IQ1_S || t == TensorType::IQ1_M; }
bool halfScales(TensorType t) {
  return t == TensorType::IQ2_XS || t == TensorType::IQ2_S || t == TensorType::IQ1_M;
}
bool paritySigns(TensorType t) {
  return t == TensorType::IQ2_XXS || t == TensorType::IQ2_XS || t == TensorType::IQ3_XXS;
}

// One group of 8 chosen: grid indices (two for IQ3), sign bits, IQ1's delta sign.
struct GroupCode {
  int index[2] = {0, 0};
  uint8_t signs = 0;
  int delta = 1;
};

// Unsigned grids: signs from x, magnitudes matched; an odd count of minus signs where
// the format stores 7 sign bits flips the smallest magnitude's sign.
GroupCode encodeUnsignedGroup(TensorType t, const Lattice& lat, const float* x, float step) {
  GroupCode c;
  float mag[8];
  for (int j = 0; j < 8; ++j) {
    mag[j] = step > 0.0f ? std::fabs(x[j]) / step : 0.0f;
    if (x[j] < 0.0f) c.signs |= static_cast<uint8_t>(1u << j);
  }
  if (paritySigns(t) && (__builtin_popcount(c.signs) & 1)) {
    int smallest = 0;
    for (int j = 1; j < 8; ++j)
      if (std::fabs(x[j]) < std::fabs(x[smallest])) smallest = j;
    c.signs ^= static_cast<uint8_t>(1u << smallest);
  }
  float err = 0.0f;
  if (lat.width == 8) {
    c.index[0] = nearest(lat, mag, 0.0f, &err);
  } else {
    c.index[0] = nearest(lat, mag, 0.0f, &err);
    c.index[1] = nearest(lat, mag + 4, 0.0f, &err);
  }
  return c;
}

GroupCode encodeIq1Group(const Lattice& lat, const float* x, float step, int delta, float* err) {
  GroupCode c;
  c.delta = delta;
  float target[8];
  for (int j = 0; j < 8; ++j) target[j] = step > 0.0f ? x[j] / step : 0.0f;
  c.index[0] = nearest(lat, target, 0.125f * static_cast<float>(delta), err);
  return c;
}

void encodeBlock(TensorType t, const float* x, uint8_t* blk) {  // x: [256]
  const Lattice& lat = latticeOf(t);
  const bool iq1 = isIq1(t);
  const int smax = iq1 ? 7 : 15;
  const float factor = gridFactor(t);
  const float top = lat.max + (iq1 ? 0.125f : 0.0f);  // the largest |g + delta|

  float amax = 0.0f;
  for (int i = 0; i < kBlockQK; ++i) amax = std::max(amax, std::fabs(x[i]));
  const uint16_t d_bits = fp32ToFp16(amax / (factor * top * static_cast<float>(2 * smax + 1)));
  const float d = fp16ToFp32(d_bits);

  // Scale units: 16 elements (half sub-blocks) or 32.
  const int unit = halfScales(t) ? 16 : 32;
  int s_code[16] = {};
  for (int u = 0; u < kBlockQK / unit; ++u) {
    float a = 0.0f;
    for (int i = u * unit; i < (u + 1) * unit; ++i) a = std::max(a, std::fabs(x[i]));
    const float ratio = d > 0.0f ? a / (d * factor * top) : 0.0f;
    s_code[u] = std::clamp(static_cast<int>(std::lround((ratio - 1.0f) / 2.0f)), 0, smax);
  }
  auto stepOf = [&](int group) {  // group: 0..31 of the block
    return d * static_cast<float>(2 * s_code[group * 8 / unit] + 1) * factor;
  };

  std::memset(blk, 0, static_cast<size_t>(blockBytes(t)));
  if (t != TensorType::IQ1_M) storeU16(blk, d_bits);
  for (int k = 0; k < 8; ++k) {
    GroupCode codes[4];
    if (t == TensorType::IQ1_S) {  // one delta for the sub-block: the better of the two
      float best = std::numeric_limits<float>::max();
      for (int delta : {1, -1}) {
        GroupCode trial[4];
        float total = 0.0f;
        for (int l = 0; l < 4; ++l) {
          float err = 0.0f;
          trial[l] = encodeIq1Group(lat, x + 32 * k + 8 * l, stepOf(4 * k + l), delta, &err);
          total += err;
        }
        if (total < best) best = total, std::copy(trial, trial + 4, codes);
      }
    } else {
      for (int l = 0; l < 4; ++l) {
        const float* xg = x + 32 * k + 8 * l;
        if (iq1) {
          float e_plus = 0.0f, e_minus = 0.0f;
          const GroupCode plus = encodeIq1Group(lat, xg, stepOf(4 * k + l), 1, &e_plus);
          const GroupCode minus = encodeIq1Group(lat, xg, stepOf(4 * k + l), -1, &e_minus);
          codes[l] = e_minus < e_plus ? minus : plus;
        } else {
          codes[l] = encodeUnsignedGroup(t, lat, xg, stepOf(4 * k + l));
        }
      }
    }
    const int s = s_code[32 * k / unit];
    const int s_hi = s_code[(32 * k + 16) / unit];
    switch (t) {
      case TensorType::IQ2_XXS:
      case TensorType::IQ3_XXS: {
        uint32_t aux = static_cast<uint32_t>(s) << 28;
        for (int l = 0; l < 4; ++l) aux |= static_cast<uint32_t>(codes[l].signs & 127) << (7 * l);
        if (t == TensorType::IQ2_XXS) {
          for (int l = 0; l < 4; ++l) blk[2 + 8 * k + l] = static_cast<uint8_t>(codes[l].index[0]);
          std::memcpy(blk + 2 + 8 * k + 4, &aux, 4);
        } else {
          for (int l = 0; l < 4; ++l) {
            blk[2 + 8 * k + 2 * l] = static_cast<uint8_t>(codes[l].index[0]);
            blk[2 + 8 * k + 2 * l + 1] = static_cast<uint8_t>(codes[l].index[1]);
          }
          std::memcpy(blk + 66 + 4 * k, &aux, 4);
        }
        break;
      }
      case TensorType::IQ2_XS:
        for (int l = 0; l < 4; ++l)
          storeU16(blk + 2 + 2 * (4 * k + l),
                   static_cast<uint16_t>(codes[l].index[0] | ((codes[l].signs & 127) << 9)));
        blk[66 + k] = static_cast<uint8_t>(s | (s_hi << 4));
        break;
      case TensorType::IQ2_S:
        for (int l = 0; l < 4; ++l) {
          blk[2 + 4 * k + l] = static_cast<uint8_t>(codes[l].index[0] & 255);
          blk[34 + 4 * k + l] = codes[l].signs;
          blk[66 + k] |= static_cast<uint8_t>((codes[l].index[0] >> 8) << (2 * l));
        }
        blk[74 + k] = static_cast<uint8_t>(s | (s_hi << 4));
        break;
      case TensorType::IQ3_S:
        for (int l = 0; l < 4; ++l) {
          blk[2 + 8 * k + 2 * l] = static_cast<uint8_t>(codes[l].index[0] & 255);
          blk[2 + 8 * k + 2 * l + 1] = static_cast<uint8_t>(codes[l].index[1] & 255);
          blk[66 + k] |= static_cast<uint8_t>(((codes[l].index[0] >> 8) << (2 * l)) |
                                              ((codes[l].index[1] >> 8) << (2 * l + 1)));
          blk[74 + 4 * k + l] = codes[l].signs;
        }
        blk[106 + k / 2] |= static_cast<uint8_t>(s << (4 * (k % 2)));
        break;
      case TensorType::IQ1_S: {
        uint16_t h = static_cast<uint16_t>((s << 12) | (codes[0].delta < 0 ? 0x8000 : 0));
        for (int l = 0; l < 4; ++l) {
          blk[2 + 4 * k + l] = static_cast<uint8_t>(codes[l].index[0] & 255);
          h = static_cast<uint16_t>(h | (((codes[l].index[0] >> 8) & 7) << (3 * l)));
        }
        storeU16(blk + 34 + 2 * k, h);
        break;
      }
      case TensorType::IQ1_M: {
        for (int l = 0; l < 4; ++l) {
          blk[4 * k + l] = static_cast<uint8_t>(codes[l].index[0] & 255);
          const int nib = ((codes[l].index[0] >> 8) & 7) | (codes[l].delta < 0 ? 8 : 0);
          blk[32 + 2 * k + l / 2] |= static_cast<uint8_t>(nib << (4 * (l % 2)));
        }
        const uint16_t bits = static_cast<uint16_t>((s | (s_hi << 3)) << (6 * (k % 2)));
        storeU16(blk + 48 + 2 * (k / 2),
                 static_cast<uint16_t>(layout::loadU16(blk + 48 + 2 * (k / 2)) | bits));
        break;
      }
      default: layout::throwUnsupported(t, "quantizeRow");
    }
  }
  if (t == TensorType::IQ1_M) {  // d's four nibbles in the scales' top nibbles
    for (int i = 0; i < 4; ++i) {
      uint8_t* sc = blk + 48 + 2 * i;
      storeU16(sc, static_cast<uint16_t>(layout::loadU16(sc) | (((d_bits >> (4 * i)) & 15) << 12)));
    }
  }
}

}  // namespace

void quantizeGridRow(TensorType t, const float* src, uint8_t* dst, int64_t n) {
  const int bytes = blockBytes(t);
  for (int64_t b = 0; b < n / kBlockQK; ++b) encodeBlock(t, src + b * kBlockQK, dst + b * bytes);
}

}  // namespace moe::quant::grids
