// Grid-coded IQ blocks read into integers (quant_grids.h describes the layouts).
#include <cstring>

#include "quant/quant.h"
#include "quant/quant_grids.h"
#include "quant/quant_layout.h"

namespace moe::quant::grids {
namespace {

using gguf::TensorType;
using layout::loadU16;

uint32_t loadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;  // little-endian host (x86-64, aarch64)
}

// Group of 8 from one 8-byte grid entry of unsigned magnitudes and 8 sign bits.
void unsignedGroup(uint64_t entry, uint8_t signs, int8_t* q) {
  for (int j = 0; j < 8; ++j) {
    const int v = static_cast<int>((entry >> (8 * j)) & 0xff);
    q[j] = static_cast<int8_t>((signs >> j) & 1 ? -v : v);
  }
}

// Group of 8 from two 4-byte IQ3 grid entries.
void unsignedGroup3(uint32_t lo, uint32_t hi, uint8_t signs, int8_t* q) {
  unsignedGroup(static_cast<uint64_t>(lo) | (static_cast<uint64_t>(hi) << 32), signs, q);
}

void signedGroup(uint64_t entry, int8_t* q) {  // IQ1: bytes are int8 -1, 0, 1
  for (int j = 0; j < 8; ++j) q[j] = static_cast<int8_t>(static_cast<uint8_t>(entry >> (8 * j)));
}

uint16_t iq1mScaleBits(const uint8_t* blk) {
  const uint8_t* sc = blk + 48;
  return static_cast<uint16_t>((loadU16(sc) >> 12) | ((loadU16(sc + 2) >> 8) & 0x00f0) |
                               ((loadU16(sc + 4) >> 4) & 0x0f00) | (loadU16(sc + 6) & 0xf000));
}

}  // namespace

int blockBytes(TensorType t) {
  switch (t) {
    case TensorType::IQ2_XXS: return kIQ2_XXSBytes;
    case TensorType::IQ2_XS: return kIQ2_XSBytes;
    case TensorType::IQ2_S: return kIQ2_SBytes;
    case TensorType::IQ3_XXS: return kIQ3_XXSBytes;
    case TensorType::IQ3_S: return kIQ3_SBytes;
    case TensorType::IQ1_S: return kIQ1_SBytes;
    case TensorType::IQ1_M: return kIQ1_MBytes;
    default: layout::throwUnsupported(t, "grid block");
  }
}

float gridBlockD(TensorType t, const uint8_t* blk) {
  return fp16ToFp32(t == TensorType::IQ1_M ? iq1mScaleBits(blk) : loadU16(blk));
}

float gridFactor(TensorType t) {
  switch (t) {
    case TensorType::IQ2_XXS:
    case TensorType::IQ2_XS:
    case TensorType::IQ2_S: return 0.125f;
    case TensorType::IQ3_XXS: return 0.25f;
    default: return 1.0f;
  }
}

void gridSub(TensorType t, const uint8_t* blk, int k, GridSub& s) {
  std::memset(s.delta, 0, sizeof s.delta);
  switch (t) {
    case TensorType::IQ2_XXS: {
      const uint8_t* idx = blk + 2 + 8 * k;
      const uint32_t aux = loadU32(idx + 4);
      for (int l = 0; l < 4; ++l) {
        unsignedGroup(kIq2xxsGrid[idx[l]], signBits(aux >> (7 * l)), s.q + 8 * l);
        s.m[l] = 2 * static_cast<int>(aux >> 28) + 1;
      }
      return;
    }
    case TensorType::IQ2_XS: {
      const uint8_t sc = blk[66 + k];
      for (int l = 0; l < 4; ++l) {
        const uint16_t v = loadU16(blk + 2 + 2 * (4 * k + l));
        unsignedGroup(kIq2xsGrid[v & 511], signBits(v >> 9), s.q + 8 * l);
        s.m[l] = 2 * ((l < 2 ? sc : sc >> 4) & 15) + 1;
      }
      return;
    }
    case TensorType::IQ2_S: {
      const uint8_t qh = blk[66 + k], sc = blk[74 + k];
      for (int l = 0; l < 4; ++l) {
        const int index = blk[2 + 4 * k + l] | (((qh >> (2 * l)) & 3) << 8);
        unsignedGroup(kIq2sGrid[index], blk[34 + 4 * k + l], s.q + 8 * l);
        s.m[l] = 2 * ((l < 2 ? sc : sc >> 4) & 15) + 1;
      }
      return;
    }
    case TensorType::IQ3_XXS: {
      const uint8_t* qs = blk + 2 + 8 * k;
      const uint32_t aux = loadU32(blk + 66 + 4 * k);
      for (int l = 0; l < 4; ++l) {
        unsignedGroup3(kIq3xxsGrid[qs[2 * l]], kIq3xxsGrid[qs[2 * l + 1]], signBits(aux >> (7 * l)),
                       s.q + 8 * l);
        s.m[l] = 2 * static_cast<int>(aux >> 28) + 1;
      }
      return;
    }
    case TensorType::IQ3_S: {
      const uint8_t* qs = blk + 2 + 8 * k;
      const uint8_t qh = blk[66 + k];
      const int m = 2 * ((blk[106 + k / 2] >> (4 * (k % 2))) & 15) + 1;
      for (int l = 0; l < 4; ++l) {
        const int lo = qs[2 * l] | (((qh >> (2 * l)) & 1) << 8);
        const int hi = qs[2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8);
        unsignedGroup3(kIq3sGrid[lo], kIq3sGrid[hi], blk[74 + 4 * k + l], s.q + 8 * l);
        s.m[l] = m;
      }
      return;
    }
    case TensorType::IQ1_S: {
      const uint16_t h = loadU16(blk + 34 + 2 * k);
      const int m = 2 * ((h >> 12) & 7) + 1;
      const int delta = (h & 0x8000) ? -1 : 1;
      for (int l = 0; l < 4; ++l) {
        signedGroup(kIq1sGrid[blk[2 + 4 * k + l] | (((h >> (3 * l)) & 7) << 8)], s.q + 8 * l);
        s.m[l] = m;
        s.delta[l] = delta;
      }
      return;
    }
    case TensorType::IQ1_M: {
      const uint16_t sc = loadU16(blk + 48 + 2 * (k / 2));
      const int shift = 6 * (k % 2);
      for (int l = 0; l < 4; ++l) {
        const uint8_t qh = blk[32 + 2 * k + l / 2];
        const int nib = (l % 2) ? qh >> 4 : qh & 15;
        signedGroup(kIq1sGrid[blk[4 * k + l] | ((nib & 7) << 8)], s.q + 8 * l);
        s.m[l] = 2 * ((sc >> (shift + (l < 2 ? 0 : 3))) & 7) + 1;
        s.delta[l] = (nib & 8) ? -1 : 1;
      }
      return;
    }
    default: layout::throwUnsupported(t, "grid decode");
  }
}

}  // namespace moe::quant::grids
