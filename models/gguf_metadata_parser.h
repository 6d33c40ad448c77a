// The metadata section of a GGUF file (gguf.md "gguf_metadata_kv_t"): typed values,
// arrays nested to kMaxArrayDepth, and counts bounded by the bytes that could hold
// them before anything is allocated. Every message names the key it was reading.
#pragma once

#include <cstdint>
#include <string>

#include "models/gguf.h"
#include "models/gguf_cursor.h"

namespace moe::gguf {

// Parses the metadata section. `key` in every message says where a problem is.
class MetadataParser {
 public:
  explicit MetadataParser(Cursor& c) : c_(c) {}

  Value readValue(ValueType type, const std::string& key, uint32_t depth);
  ValueType readType(const std::string& key, const char* role);

 private:
  static Field valueOf(const std::string& key) { return Field{"value of key", key}; }
  bool readBool(const std::string& key);
  void readArray(Value& v, const std::string& key, uint32_t depth);
  // A hostile count must not make us reserve memory the file cannot back.
  void checkArrayCount(const std::string& key, ValueType elem, uint64_t count);

  Cursor& c_;
  uint64_t total_elements_ = 0;
};

}  // namespace moe::gguf
