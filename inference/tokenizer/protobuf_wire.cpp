#include "inference/tokenizer/protobuf_wire.h"

#include <cstring>

namespace moe::pb {

namespace {
constexpr uint32_t kWireVarint = 0;
constexpr uint32_t kWireLengthDelimited = 2;
constexpr uint32_t kWireFixed32 = 5;
}  // namespace

void WireWriter::writeVarint(uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

void WireWriter::writeTag(uint32_t field, uint32_t wire_type) {
  writeVarint((static_cast<uint64_t>(field) << 3) | wire_type);
}

void WireWriter::writeVarintField(uint32_t field, uint64_t value) {
  writeTag(field, kWireVarint);
  writeVarint(value);
}

void WireWriter::writeInt32Field(uint32_t field, int32_t value) {
  // int32 is encoded as its 64-bit two's complement (so -1 takes 10 bytes).
  writeVarintField(field, static_cast<uint64_t>(static_cast<int64_t>(value)));
}

void WireWriter::writeFloatField(uint32_t field, float value) {
  writeTag(field, kWireFixed32);
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

void WireWriter::writeBytesField(uint32_t field, std::string_view bytes) {
  writeTag(field, kWireLengthDelimited);
  writeVarint(bytes.size());
  out_.append(bytes);
}

}  // namespace moe::pb
