// A tiny protobuf wire-format writer: just enough to build a SentencePiece
// ModelProto in memory (the library ships no .pb.h and carries its own
// protobuf-lite, so we cannot link a protobuf runtime; see shared/TOOLCHAIN.md).
// Encoding facts: protobuf "Encoding" guide (developers.google.com/protocol-buffers):
// tag = (field_number << 3) | wire_type; varint = 7 bits per byte, low first,
// high bit = more; wire types 0 varint, 2 length-delimited, 5 fixed32 (little-endian).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace moe::pb {

class WireWriter {
 public:
  // int32/int64/uint/bool/enum fields. Negative int32 values are sign-extended
  // to 64 bits (10 bytes), as protobuf does for int32.
  void writeVarintField(uint32_t field, uint64_t value);
  void writeInt32Field(uint32_t field, int32_t value);
  void writeBoolField(uint32_t field, bool value) { writeVarintField(field, value ? 1 : 0); }
  void writeFloatField(uint32_t field, float value);
  // string / bytes / embedded message (the message's serialized bytes).
  void writeBytesField(uint32_t field, std::string_view bytes);

  const std::string& bytes() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void writeVarint(uint64_t value);
  void writeTag(uint32_t field, uint32_t wire_type);
  std::string out_;
};

}  // namespace moe::pb
