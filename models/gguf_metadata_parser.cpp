#include "models/gguf_metadata_parser.h"

#include <utility>
#include <vector>

namespace moe::gguf {

namespace {

// Smallest encoding of one value of type t: used to bound counts before allocating.
uint64_t minEncodedSize(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::Bool: return 1;
    case ValueType::U16:
    case ValueType::I16: return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32: return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64: return 8;
    case ValueType::String: return 8;  // u64 length, empty string
    case ValueType::Array: return 12;  // u32 element type + u64 count, no elements
  }
  return 1;
}

bool isKnownValueType(uint32_t id) { return id <= static_cast<uint32_t>(ValueType::F64); }

}  // namespace

Value MetadataParser::readValue(ValueType type, const std::string& key, uint32_t depth) {
  Value v;
  v.type = type;
  switch (type) {
    case ValueType::U8: v.data = uint64_t{c_.read<uint8_t>(valueOf(key))}; break;
    case ValueType::U16: v.data = uint64_t{c_.read<uint16_t>(valueOf(key))}; break;
    case ValueType::U32: v.data = uint64_t{c_.read<uint32_t>(valueOf(key))}; break;
    case ValueType::U64: v.data = c_.read<uint64_t>(valueOf(key)); break;
    case ValueType::I8: v.data = int64_t{c_.read<int8_t>(valueOf(key))}; break;
    case ValueType::I16: v.data = int64_t{c_.read<int16_t>(valueOf(key))}; break;
    case ValueType::I32: v.data = int64_t{c_.read<int32_t>(valueOf(key))}; break;
    case ValueType::I64: v.data = c_.read<int64_t>(valueOf(key)); break;
    case ValueType::F32: v.data = double{c_.read<float>(valueOf(key))}; break;
    case ValueType::F64: v.data = c_.read<double>(valueOf(key)); break;
    case ValueType::Bool: v.data = readBool(key); break;
    case ValueType::String: v.data = c_.readString(valueOf(key)); break;
    case ValueType::Array: readArray(v, key, depth); break;
  }
  return v;
}

ValueType MetadataParser::readType(const std::string& key, const char* role) {
  const uint64_t at = c_.pos();
  const uint32_t id = c_.read<uint32_t>(Field{"value of key", key, " type"});
  if (!isKnownValueType(id)) {
    throw GgufError("key " + quoted(key) + ": unknown " + role + " " + std::to_string(id) + " at offset " +
                    std::to_string(at));
  }
  return static_cast<ValueType>(id);
}

bool MetadataParser::readBool(const std::string& key) {
  const uint64_t at = c_.pos();
  const uint8_t b = c_.read<uint8_t>(valueOf(key));
  if (b > 1) {
    throw GgufError("key " + quoted(key) + ": bool byte " + std::to_string(b) + " at offset " +
                    std::to_string(at) + " is neither 0 nor 1");
  }
  return b == 1;
}

void MetadataParser::readArray(Value& v, const std::string& key, uint32_t depth) {
  if (depth >= kMaxArrayDepth) {
    throw GgufError("key " + quoted(key) + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth) +
                    " at offset " + std::to_string(c_.pos()));
  }
  v.array_type = readType(key, "array element type");
  const uint64_t count = c_.read<uint64_t>(Field{"value of key", key, " array count"});
  checkArrayCount(key, v.array_type, count);
  std::vector<Value> elems;
  elems.reserve(count);  // bounded by checkArrayCount
  for (uint64_t i = 0; i < count; ++i) elems.push_back(readValue(v.array_type, key, depth + 1));
  v.data = std::move(elems);
}

void MetadataParser::checkArrayCount(const std::string& key, ValueType elem, uint64_t count) {
  const uint64_t min = minEncodedSize(elem);
  if (count > c_.remaining() / min) {
    throw GgufError("key " + quoted(key) + ": array of " + std::to_string(count) + " " + valueTypeName(elem) +
                    " elements at offset " + std::to_string(c_.pos()) + " cannot fit in the " +
                    std::to_string(c_.remaining()) + " bytes left");
  }
  total_elements_ += count;
  if (total_elements_ > kMaxMetadataElements) {
    throw GgufError("key " + quoted(key) + ": metadata arrays hold more than " +
                    std::to_string(kMaxMetadataElements) + " elements in all");
  }
}

}  // namespace moe::gguf
