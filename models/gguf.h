// GGUF v3 model files: types, reader and writer.
// Format facts: ggml docs/gguf.md, summarised in shared/GGUF-NOTES.md.
// Everything read from a file is untrusted: every offset, size, count, string
// length, tensor extent and alignment is checked, and a violation throws
// GgufError with a message naming the problem and where it was found.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

namespace moe::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint32_t kVersion = 3;
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr size_t kMaxTensorNameBytes = 64;
inline constexpr uint32_t kMaxDims = 4;
// Reader limits (not in the spec; they bound what a hostile file can make us do).
inline constexpr uint32_t kMaxArrayDepth = 8;                 // nested metadata arrays
inline constexpr uint64_t kMaxMetadataElements = 1ull << 26;  // array elements, all keys together
// general.alignment above this is refused by reader and writer: real files use 32..4096,
// and a huge value would only make a rewrite pad gigabytes (found by fuzzing).
inline constexpr uint64_t kMaxAlignment = 1ull << 20;

class GgufError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char* valueTypeName(ValueType t);

// ggml tensor type ids (ggml.h enum ggml_type). Only those whose block layout we
// know are accepted by the reader; the CPU backend computes a subset of them.
enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  IQ1_M = 29,
  BF16 = 30,
  MXFP4 = 39,
};

struct TypeTraits {
  const char* name;
  uint32_t block_elems;  // elements per block (1 for plain types)
  uint32_t block_bytes;  // bytes per block
};
// Traits of a known type id, or nullopt for an unknown one.
std::optional<TypeTraits> typeTraits(uint32_t type_id);
const char* tensorTypeName(TensorType t);
// Bytes of one row of ne0 elements; throws GgufError if ne0 is not a whole number of blocks.
uint64_t rowBytes(TensorType t, uint64_t ne0);

// One metadata value. Arrays hold their elements as Values (arrays may nest).
struct Value {
  ValueType type = ValueType::U8;
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<Value>> data;
  ValueType array_type = ValueType::U8;  // element type when type == Array

  // Conversions that check the stored type; nullopt when it does not fit.
  std::optional<uint64_t> asUint() const;  // any non-negative integer type
  std::optional<int64_t> asInt() const;    // any integer type that fits
  std::optional<double> asFloat() const;   // float or integer types
  std::optional<bool> asBool() const;
  const std::string* asString() const;
  const std::vector<Value>* asArray() const;

  // Builders that store the value in the variant member the type implies
  // (unsigned types -> uint64_t, signed -> int64_t, F32/F64 -> double).
  static Value ofUint(ValueType t, uint64_t v);  // U8, U16, U32, U64
  static Value ofInt(ValueType t, int64_t v);    // I8, I16, I32, I64
  static Value ofFloat(ValueType t, double v);   // F32, F64
  static Value ofBool(bool v);
  static Value ofString(std::string v);
  static Value ofArray(ValueType element_type, std::vector<Value> elements);
};

struct KeyValue {
  std::string key;
  Value value;
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ne0 first (the contiguous dimension)
  TensorType type = TensorType::F32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;  // computed from dims and type

  uint64_t nElements() const;
  uint64_t ne(size_t i) const { return i < dims.size() ? dims[i] : 1; }
  uint64_t rowBytes() const;  // bytes of one ne0 row
};

// A parsed GGUF file. The tensor data stays in the mapping (or owned buffer);
// spans returned by tensorData() are valid as long as this object lives.
class GgufFile {
 public:
  // Maps the file read-only. Throws GgufError (missing file, malformed content).
  static GgufFile open(const std::string& path);
  // Parses bytes held in memory (the embedded demo model, fuzzing, tests).
  static GgufFile fromBytes(std::vector<uint8_t> bytes);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t dataOffset() const { return data_offset_; }
  uint64_t fileSize() const { return size_; }
  const std::string& path() const { return path_; }  // empty for fromBytes
  // Why the file at path() is no longer the one mapped (gone, replaced, resized or
  // rewritten), or nullopt. A mapped file truncated under the reader makes its next
  // access to a lost page a SIGBUS: callers check this before they compute.
  std::optional<std::string> changedOnDisk() const;

  const std::vector<KeyValue>& metadata() const { return kv_; }
  const Value* find(std::string_view key) const;
  // Typed look-ups: nullopt when the key is absent; GgufError when present with a wrong type.
  std::optional<uint64_t> getUint(std::string_view key) const;
  std::optional<int64_t> getInt(std::string_view key) const;
  std::optional<double> getFloat(std::string_view key) const;
  std::optional<bool> getBool(std::string_view key) const;
  std::optional<std::string> getString(std::string_view key) const;
  std::optional<std::vector<std::string>> getStringArray(std::string_view key) const;
  std::optional<std::vector<double>> getFloatArray(std::string_view key) const;
  std::optional<std::vector<int64_t>> getIntArray(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* findTensor(std::string_view name) const;
  std::span<const uint8_t> tensorData(const TensorInfo& t) const;

 private:
  GgufFile();
  void parse();

  struct Storage;
  std::unique_ptr<Storage> storage_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> kv_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;  // name -> index in tensors_
};

// Builds a GGUF v3 file: metadata in insertion order, tensors laid out at
// `general.alignment` (default 32) in insertion order.
class GgufWriter {
 public:
  void setUint8(std::string key, uint8_t v);
  void setUint32(std::string key, uint32_t v);
  void setInt32(std::string key, int32_t v);
  void setUint64(std::string key, uint64_t v);
  void setFloat32(std::string key, float v);
  void setBool(std::string key, bool v);
  void setString(std::string key, std::string v);
  void setStringArray(std::string key, const std::vector<std::string>& v);
  void setFloat32Array(std::string key, const std::vector<float>& v);
  void setInt32Array(std::string key, const std::vector<int32_t>& v);
  void setValue(std::string key, Value v);  // any value, arrays included
  void setAlignment(uint32_t alignment);    // writes general.alignment

  // dims ne0 first; bytes.size() must equal the size the type and dims imply.
  void addTensor(std::string name, std::vector<uint64_t> dims, TensorType type, std::vector<uint8_t> bytes);

  // As addTensor, but the bytes are produced by `fill` while the file is written,
  // so multi-GB files (full-size presets) never sit in memory whole.
  void addTensorGenerated(std::string name, std::vector<uint64_t> dims, TensorType type,
                          std::function<void(std::span<uint8_t> dst)> fill);

  // Bytes of the data section (tensors at their aligned offsets): the bulk of
  // the file, known before anything is written (disk-space checks).
  uint64_t dataSectionBytes() const;

  std::vector<uint8_t> toBytes() const;
  // Writes to path + ".tmp" and renames, so a crash never leaves a half file.
  void writeFile(const std::string& path) const;
  // The header (metadata, tensor infos) and a data section of the right size left
  // unwritten (a sparse file of zeros): a full-size model's layout, for describing
  // shapes and sizes without generating hundreds of GB.
  void writeLayoutOnly(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    std::vector<uint64_t> dims;
    TensorType type;
    std::vector<uint8_t> bytes;
    std::function<void(std::span<uint8_t>)> fill;  // when set, bytes is empty
    uint64_t nbytes = 0;
  };
  std::vector<KeyValue> kv_;
  std::vector<PendingTensor> tensors_;
  uint32_t alignment_ = kDefaultAlignment;
};

}  // namespace moe::gguf
