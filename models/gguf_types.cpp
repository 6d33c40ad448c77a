// GGUF value and tensor types: names, block traits, row sizes, Value conversions.
// Type ids and block sizes: ggml docs/gguf.md and ggml.h / ggml-common.h block
// definitions (summarised in shared/GGUF-NOTES.md).
#include <array>
#include <limits>
#include <string>

#include "models/gguf.h"

namespace moe::gguf {

const char* valueTypeName(ValueType t) {
  switch (t) {
    case ValueType::U8: return "u8";
    case ValueType::I8: return "i8";
    case ValueType::U16: return "u16";
    case ValueType::I16: return "i16";
    case ValueType::U32: return "u32";
    case ValueType::I32: return "i32";
    case ValueType::F32: return "f32";
    case ValueType::Bool: return "bool";
    case ValueType::String: return "string";
    case ValueType::Array: return "array";
    case ValueType::U64: return "u64";
    case ValueType::I64: return "i64";
    case ValueType::F64: return "f64";
  }
  return "unknown";
}

namespace {

struct TypeEntry {
  uint32_t id;
  TypeTraits traits;
};

// Block sizes from ggml-common.h (QK_K = 256 for the K-quants):
// Q4_0 = f16 d + 16 nibble bytes; Q4_1 = d, m + 16; Q5_0 = d + qh[4] + 16;
// Q5_1 = d, m + qh[4] + 16; Q8_0 = d + 32 int8; Q2_K = scales[16] + qs[64] + d, dmin;
// Q3_K = hmask[32] + qs[64] + scales[12] + d; Q4_K = d, dmin + scales[12] + qs[128];
// Q5_K = Q4_K + qh[32]; Q6_K = ql[128] + qh[64] + scales[16] + d;
// IQ2_XXS = f16 d + u16 qs[32]; IQ2_XS = IQ2_XXS + scales[8]; IQ2_S = d + qs[64] + qh[8] +
// scales[8]; IQ3_XXS = d + qs[96]; IQ3_S = d + qs[64] + qh[8] + signs[32] + scales[4];
// IQ1_S = d + qs[32] + u16 qh[8]; IQ1_M = qs[32] + qh[16] + scales[8] (d inside them);
// IQ4_NL = f16 d + 16 nibble bytes; IQ4_XS = f16 d + u16 scales_h + scales_l[4] + qs[128];
// MXFP4 = e8m0 scale byte + 16 bytes of e2m1 nibbles.
constexpr std::array<TypeEntry, 26> kTypes{{
    {0, {"F32", 1, 4}},         {1, {"F16", 1, 2}},         {2, {"Q4_0", 32, 18}},
    {3, {"Q4_1", 32, 20}},      {6, {"Q5_0", 32, 22}},      {7, {"Q5_1", 32, 24}},
    {8, {"Q8_0", 32, 34}},      {10, {"Q2_K", 256, 84}},    {11, {"Q3_K", 256, 110}},
    {12, {"Q4_K", 256, 144}},   {13, {"Q5_K", 256, 176}},   {14, {"Q6_K", 256, 210}},
    {16, {"IQ2_XXS", 256, 66}}, {17, {"IQ2_XS", 256, 74}},  {18, {"IQ3_XXS", 256, 98}},
    {19, {"IQ1_S", 256, 50}},   {20, {"IQ4_NL", 32, 18}},   {21, {"IQ3_S", 256, 110}},
    {22, {"IQ2_S", 256, 82}},   {23, {"IQ4_XS", 256, 136}}, {24, {"I8", 1, 1}},
    {25, {"I16", 1, 2}},        {26, {"I32", 1, 4}},        {29, {"IQ1_M", 256, 56}},
    {30, {"BF16", 1, 2}},       {39, {"MXFP4", 32, 17}},
}};

bool isUnsignedType(ValueType t) {
  return t == ValueType::U8 || t == ValueType::U16 || t == ValueType::U32 || t == ValueType::U64;
}
bool isSignedType(ValueType t) {
  return t == ValueType::I8 || t == ValueType::I16 || t == ValueType::I32 || t == ValueType::I64;
}

}  // namespace

std::optional<TypeTraits> typeTraits(uint32_t type_id) {
  for (const TypeEntry& e : kTypes) {
    if (e.id == type_id) return e.traits;
  }
  return std::nullopt;
}

const char* tensorTypeName(TensorType t) {
  auto traits = typeTraits(static_cast<uint32_t>(t));
  return traits ? traits->name : "unknown";
}

uint64_t rowBytes(TensorType t, uint64_t ne0) {
  auto traits = typeTraits(static_cast<uint32_t>(t));
  if (!traits) {
    throw GgufError("unknown tensor type id " + std::to_string(static_cast<uint32_t>(t)));
  }
  if (ne0 % traits->block_elems != 0) {
    throw GgufError(std::string("row of ") + std::to_string(ne0) + " elements is not a whole number of " +
                    traits->name + " blocks (" + std::to_string(traits->block_elems) + " elements each)");
  }
  // blocks * block_bytes overflows only for absurd ne0 (plain F32 rows past 2^62), which a
  // hostile file can still claim: check rather than wrap.
  const uint64_t blocks = ne0 / traits->block_elems;
  if (blocks > std::numeric_limits<uint64_t>::max() / traits->block_bytes) {
    throw GgufError("row of " + std::to_string(ne0) + " elements overflows a 64-bit byte count");
  }
  return blocks * traits->block_bytes;
}

uint64_t TensorInfo::nElements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;  // the reader rejects products that overflow
  return n;
}

uint64_t TensorInfo::rowBytes() const { return gguf::rowBytes(type, ne(0)); }

// ---- Value ----------------------------------------------------------------

std::optional<uint64_t> Value::asUint() const {
  if (const auto* u = std::get_if<uint64_t>(&data)) return *u;
  if (const auto* i = std::get_if<int64_t>(&data)) {
    if (*i >= 0) return static_cast<uint64_t>(*i);
  }
  return std::nullopt;
}

std::optional<int64_t> Value::asInt() const {
  if (const auto* i = std::get_if<int64_t>(&data)) return *i;
  if (const auto* u = std::get_if<uint64_t>(&data)) {
    if (*u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(*u);
  }
  return std::nullopt;
}

std::optional<double> Value::asFloat() const {
  if (const auto* d = std::get_if<double>(&data)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&data)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&data)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> Value::asBool() const {
  if (const auto* b = std::get_if<bool>(&data)) return *b;
  return std::nullopt;
}

const std::string* Value::asString() const { return std::get_if<std::string>(&data); }

const std::vector<Value>* Value::asArray() const { return std::get_if<std::vector<Value>>(&data); }

Value Value::ofUint(ValueType t, uint64_t v) {
  if (!isUnsignedType(t))
    throw GgufError(std::string("Value::ofUint: ") + valueTypeName(t) + " is not unsigned");
  Value out;
  out.type = t;
  out.data = v;
  return out;
}

Value Value::ofInt(ValueType t, int64_t v) {
  if (!isSignedType(t)) throw GgufError(std::string("Value::ofInt: ") + valueTypeName(t) + " is not signed");
  Value out;
  out.type = t;
  out.data = v;
  return out;
}

Value Value::ofFloat(ValueType t, double v) {
  if (t != ValueType::F32 && t != ValueType::F64) {
    throw GgufError(std::string("Value::ofFloat: ") + valueTypeName(t) + " is not a float type");
  }
  Value out;
  out.type = t;
  out.data = v;
  return out;
}

Value Value::ofBool(bool v) {
  Value out;
  out.type = ValueType::Bool;
  out.data = v;
  return out;
}

Value Value::ofString(std::string v) {
  Value out;
  out.type = ValueType::String;
  out.data = std::move(v);
  return out;
}

Value Value::ofArray(ValueType element_type, std::vector<Value> elements) {
  Value out;
  out.type = ValueType::Array;
  out.array_type = element_type;
  out.data = std::move(elements);
  return out;
}

}  // namespace moe::gguf
