// Helpers shared by the GGUF test programs (test_gguf, test_gguf_robustness).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <time.h>

#include "models/gguf.h"
#include "models/vocab.h"

using namespace moe::gguf;

namespace gguf_test {

// ---- helpers ---------------------------------------------------------------

// Independent little-endian GGUF byte builder (does not use GgufWriter).
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
    return *this;
  }
  Bytes& str(std::string_view s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& padTo(size_t a) {
    while (b.size() % a != 0) b.push_back(0);
    return *this;
  }
};

inline std::vector<uint8_t> fromHex(const char* hex) {
  std::vector<uint8_t> out;
  auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (const char* p = hex; *p != 0;) {
    if (*p == ' ' || *p == '\n') {
      ++p;
      continue;
    }
    out.push_back(static_cast<uint8_t>(nibble(p[0]) << 4 | nibble(p[1])));
    p += 2;
  }
  return out;
}

inline std::vector<uint8_t> patternBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(rng());
  return v;
}

inline bool sameScalar(const Value& a, const Value& b) {
  if (a.data.index() != b.data.index()) return false;
  if (auto u = std::get_if<uint64_t>(&a.data)) return *u == std::get<uint64_t>(b.data);
  if (auto i = std::get_if<int64_t>(&a.data)) return *i == std::get<int64_t>(b.data);
  if (auto d = std::get_if<double>(&a.data)) return *d == std::get<double>(b.data);
  if (auto x = std::get_if<bool>(&a.data)) return *x == std::get<bool>(b.data);
  if (auto s = std::get_if<std::string>(&a.data)) return *s == std::get<std::string>(b.data);
  return false;
}

inline bool sameValue(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  if (a.type != ValueType::Array) return sameScalar(a, b);
  if (a.array_type != b.array_type) return false;
  const auto& x = *a.asArray();
  const auto& y = *b.asArray();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!sameValue(x[i], y[i])) return false;
  }
  return true;
}

// Expects fn to throw GgufError whose message contains `needle`.
template <typename Fn>
inline bool throwsWith(Fn fn, const std::string& needle, std::string* got = nullptr) {
  try {
    fn();
  } catch (const GgufError& e) {
    if (got) *got = e.what();
    return std::string(e.what()).find(needle) != std::string::npos;
  }
  if (got) *got = "(no exception)";
  return false;
}

const std::vector<uint32_t> kAllTensorTypeIds = {0, 1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 24, 25, 26, 30, 39};

inline std::vector<std::pair<std::string, Value>> everyValueType() {
  using VT = ValueType;
  std::vector<std::pair<std::string, Value>> kv = {
      {"v.u8", Value::ofUint(VT::U8, 255)},
      {"v.i8", Value::ofInt(VT::I8, -128)},
      {"v.u16", Value::ofUint(VT::U16, 65535)},
      {"v.i16", Value::ofInt(VT::I16, -32768)},
      {"v.u32", Value::ofUint(VT::U32, 4294967295u)},
      {"v.i32", Value::ofInt(VT::I32, -2147483647 - 1)},
      {"v.f32", Value::ofFloat(VT::F32, 3.25)},
      {"v.bool", Value::ofBool(true)},
      {"v.string", Value::ofString("")},  // set below: holds a NUL byte
      {"v.u64", Value::ofUint(VT::U64, UINT64_MAX)},
      {"v.i64", Value::ofInt(VT::I64, INT64_MIN)},
      {"v.f64", Value::ofFloat(VT::F64, -1e300)},
      {"v.empty_string", Value::ofString("")},
      {"v.empty_array", Value::ofArray(VT::U32, {})},
      {"v.arr_u8", Value::ofArray(VT::U8, {Value::ofUint(VT::U8, 0), Value::ofUint(VT::U8, 7)})},
      {"v.arr_i16", Value::ofArray(VT::I16, {Value::ofInt(VT::I16, -1)})},
      {"v.arr_f64", Value::ofArray(VT::F64, {Value::ofFloat(VT::F64, 0.5), Value::ofFloat(VT::F64, -2)})},
      {"v.arr_bool", Value::ofArray(VT::Bool, {Value::ofBool(false), Value::ofBool(true)})},
      {"v.arr_i64", Value::ofArray(VT::I64, {Value::ofInt(VT::I64, INT64_MAX)})},
  };
  static const char kText[] = "unicode \xE2\x9C\x93 and \0 inside";
  kv[8].second = Value::ofString(std::string(kText, sizeof kText - 1));
  // Nested: array of arrays of strings, and array of arrays of arrays of i32.
  Value inner1 = Value::ofArray(VT::String, {Value::ofString("a"), Value::ofString("bc")});
  Value inner2 = Value::ofArray(VT::String, {});
  kv.push_back({"v.nested_str", Value::ofArray(VT::Array, {inner1, inner2})});
  Value deep = Value::ofArray(VT::I32, {Value::ofInt(VT::I32, 42)});
  for (int i = 0; i < 3; ++i) deep = Value::ofArray(VT::Array, {deep});
  kv.push_back({"v.nested_deep", deep});
  return kv;
}

// A small writer-made model with vocab, metadata of several types and tensors.
inline GgufWriter smallModelWriter() {
  GgufWriter w;
  w.setString("general.architecture", "llama");
  w.setUint32("llama.block_count", 1);
  w.setFloat32("llama.rope.freq_base", 10000.0f);
  moe::VocabData v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>", "a", "b"};
  v.scores = {0, 0, 0, -1, -2};
  v.token_types = {2, 3, 3, 1, 1};
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  v.writeTo(w);
  w.setValue(
      "x.nested",
      Value::ofArray(ValueType::Array, {Value::ofArray(ValueType::U16, {Value::ofUint(ValueType::U16, 9)})}));
  w.addTensor("token_embd.weight", {32, 5}, TensorType::Q8_0, patternBytes(34 * 5, 1));
  w.addTensor("output_norm.weight", {32}, TensorType::F32, patternBytes(128, 2));
  return w;
}

inline double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// The repository's root directory (canonical); empty where it cannot be resolved.
inline std::string repoRoot() {
  std::error_code ec;
  const auto root = std::filesystem::canonical(MOECHAT_TEST_DATA "/../..", ec);
  return ec ? std::string() : root.string();
}

}  // namespace gguf_test

using namespace gguf_test;
