// The portable decoders: the exact f32 values of the elements of a row, 32 at a
// time (internal to models/; quant.h's dequantizeRow and dotRow are built on them).
#pragma once

#include <cstdint>

#include "models/gguf.h"

namespace moe::quant::decode {

// Decodes elements [first, first + count) of a row; count <= 32, and for block
// types first is a block start (or a 32-element sub-block of a 256-element block)
// and count == 32. Throws std::invalid_argument for a type that is not computed.
void decodeChunk(gguf::TensorType t, const uint8_t* row, int64_t first, int count, float* w);  // w: [count]

}  // namespace moe::quant::decode
