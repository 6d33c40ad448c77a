// GGUF v3 writer. Layout facts: ggml docs/gguf.md ("File Structure"): header, metadata
// key/values in order, tensor infos, padding to general.alignment, tensor data with
// each tensor at an aligned offset from the start of the data section. Like llama.cpp
// and gguf-py we also pad after the last tensor, so the file size is a multiple of the
// alignment.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <unordered_set>

#include <unistd.h>

#include "models/gguf.h"

namespace moe::gguf {

namespace {

uint64_t alignUpTo(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Little-endian byte sink for the header, metadata and tensor infos.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>& out) : out_(out) {}

  template <typename T>
  void put(T v) {
    uint8_t b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));  // little-endian host (static_assert in the reader)
    out_.insert(out_.end(), b, b + sizeof(T));
  }
  void putString(std::string_view s) {
    put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void padTo(uint64_t alignment) { out_.resize(alignUpTo(out_.size(), alignment), 0); }

 private:
  std::vector<uint8_t>& out_;
};

[[noreturn]] void badValue(const std::string& key, const Value& v, const std::string& why) {
  throw GgufError("GgufWriter: key '" + key + "' (" + valueTypeName(v.type) + "): " + why);
}

// Range-checks an integer against its declared width.
void checkIntRange(const std::string& key, const Value& v) {
  auto inUnsigned = [&](uint64_t max) {
    auto u = v.asUint();
    if (!u || *u > max) badValue(key, v, "value does not fit the type");
  };
  auto inSigned = [&](int64_t min, int64_t max) {
    auto i = v.asInt();
    if (!i || *i < min || *i > max) badValue(key, v, "value does not fit the type");
  };
  switch (v.type) {
    case ValueType::U8: inUnsigned(0xff); break;
    case ValueType::U16: inUnsigned(0xffff); break;
    case ValueType::U32: inUnsigned(0xffffffffu); break;
    case ValueType::U64: inUnsigned(std::numeric_limits<uint64_t>::max()); break;
    case ValueType::I8: inSigned(-128, 127); break;
    case ValueType::I16: inSigned(-32768, 32767); break;
    case ValueType::I32:
      inSigned(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max());
      break;
    case ValueType::I64:
      inSigned(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
      break;
    default: break;
  }
}

// Checks that the variant member holds what the declared type needs, recursively.
void validateValue(const std::string& key, const Value& v, uint32_t depth) {
  switch (v.type) {
    case ValueType::U8:
    case ValueType::U16:
    case ValueType::U32:
    case ValueType::U64:
    case ValueType::I8:
    case ValueType::I16:
    case ValueType::I32:
    case ValueType::I64: checkIntRange(key, v); return;
    case ValueType::F32:
    case ValueType::F64:
      if (!std::holds_alternative<double>(v.data)) badValue(key, v, "float types hold a double");
      // Converting an out-of-range double to float is undefined behaviour.
      if (v.type == ValueType::F32 && std::isfinite(*v.asFloat()) &&
          std::fabs(*v.asFloat()) > std::numeric_limits<float>::max()) {
        badValue(key, v, "value does not fit the type");
      }
      return;
    case ValueType::Bool:
      if (!v.asBool()) badValue(key, v, "bool holds a bool");
      return;
    case ValueType::String:
      if (!v.asString()) badValue(key, v, "string holds a std::string");
      return;
    case ValueType::Array: {
      if (depth >= kMaxArrayDepth) badValue(key, v, "arrays nested too deep for readers");
      const auto* arr = v.asArray();
      if (arr == nullptr) badValue(key, v, "array holds a std::vector<Value>");
      for (const Value& e : *arr) {
        if (e.type != v.array_type)
          badValue(key, v,
                   std::string("element of type ") + valueTypeName(e.type) + " in an array of " +
                       valueTypeName(v.array_type));
        validateValue(key, e, depth + 1);
      }
      return;
    }
  }
  badValue(key, v, "unknown value type");
}

// Value encodings (gguf.md "gguf_metadata_value_t"); arrays carry type and count.
void putValue(ByteWriter& w, const Value& v) {
  switch (v.type) {
    case ValueType::U8: w.put<uint8_t>(static_cast<uint8_t>(*v.asUint())); break;
    case ValueType::U16: w.put<uint16_t>(static_cast<uint16_t>(*v.asUint())); break;
    case ValueType::U32: w.put<uint32_t>(static_cast<uint32_t>(*v.asUint())); break;
    case ValueType::U64: w.put<uint64_t>(*v.asUint()); break;
    case ValueType::I8: w.put<int8_t>(static_cast<int8_t>(*v.asInt())); break;
    case ValueType::I16: w.put<int16_t>(static_cast<int16_t>(*v.asInt())); break;
    case ValueType::I32: w.put<int32_t>(static_cast<int32_t>(*v.asInt())); break;
    case ValueType::I64: w.put<int64_t>(*v.asInt()); break;
    case ValueType::F32: w.put<float>(static_cast<float>(*v.asFloat())); break;
    case ValueType::F64: w.put<double>(*v.asFloat()); break;
    case ValueType::Bool: w.put<uint8_t>(*v.asBool() ? 1 : 0); break;
    case ValueType::String: w.putString(*v.asString()); break;
    case ValueType::Array:
      w.put<uint32_t>(static_cast<uint32_t>(v.array_type));
      w.put<uint64_t>(v.asArray()->size());
      for (const Value& e : *v.asArray()) putValue(w, e);
      break;
  }
}

void checkTensorShape(const std::string& name, const std::vector<uint64_t>& dims, TensorType type) {
  if (name.empty() || name.size() > kMaxTensorNameBytes) {
    throw GgufError("GgufWriter: tensor name '" + name + "' must be 1.." +
                    std::to_string(kMaxTensorNameBytes) + " bytes");
  }
  if (dims.empty() || dims.size() > kMaxDims) {
    throw GgufError("GgufWriter: tensor '" + name + "' has " + std::to_string(dims.size()) + " dims (1..4)");
  }
  for (uint64_t d : dims) {
    if (d == 0) throw GgufError("GgufWriter: tensor '" + name + "' has a zero dimension");
  }
  if (!typeTraits(static_cast<uint32_t>(type))) {
    throw GgufError("GgufWriter: tensor '" + name + "' has unknown type id " +
                    std::to_string(static_cast<uint32_t>(type)));
  }
}

uint64_t tensorBytes(const std::string& name, const std::vector<uint64_t>& dims, TensorType type) {
  try {
    uint64_t n = rowBytes(type, dims[0]);
    for (size_t i = 1; i < dims.size(); ++i) {
      if (n > std::numeric_limits<uint64_t>::max() / dims[i]) throw GgufError("byte size overflows");
      n *= dims[i];
    }
    return n;
  } catch (const GgufError& e) {
    throw GgufError("GgufWriter: tensor '" + name + "': " + e.what());
  }
}

// Owns the FILE* of path + ".tmp"; removes the temporary unless committed.
class TempFile {
 public:
  explicit TempFile(const std::string& path) : path_(path), tmp_(path + ".tmp") {
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (f_ == nullptr) fail("cannot create");
  }
  ~TempFile() {
    if (f_ != nullptr) std::fclose(f_);
    if (!committed_) std::remove(tmp_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(const uint8_t* p, size_t n) {
    if (n != 0 && std::fwrite(p, 1, n, f_) != n) fail("cannot write");
  }
  void writeZeros(uint64_t n) {
    static const uint8_t zeros[256] = {};
    while (n > 0) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof zeros));
      write(zeros, k);
      n -= k;
    }
  }
  // Flush, fsync, close and rename: readers see either the old file or the whole new one.
  void commit() {
    if (std::fflush(f_) != 0 || fsync(fileno(f_)) != 0) fail("cannot flush");
    const int rc = std::fclose(f_);
    f_ = nullptr;
    if (rc != 0) fail("cannot close");
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) fail("cannot rename to " + path_);
    committed_ = true;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw GgufError("GgufWriter: " + what + " " + tmp_ + ": " + std::strerror(errno));
  }
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

}  // namespace

// ---- metadata -------------------------------------------------------------

void GgufWriter::setValue(std::string key, Value v) {
  if (key.empty()) throw GgufError("GgufWriter: empty metadata key");
  validateValue(key, v, 0);
  if (key == "general.alignment") {
    const uint64_t a = v.asUint().value_or(0);
    // gguf.md: u32, a multiple of 8; a power of two so offsets can be masked.
    if (v.type != ValueType::U32 || a < 8 || a > kMaxAlignment || (a & (a - 1)) != 0) {
      throw GgufError("GgufWriter: general.alignment must be a u32 power of two in 8.." +
                      std::to_string(kMaxAlignment));
    }
    alignment_ = static_cast<uint32_t>(a);
  }
  for (KeyValue& kv : kv_) {
    if (kv.key == key) {  // replace in place: the key keeps its first position
      kv.value = std::move(v);
      return;
    }
  }
  kv_.push_back(KeyValue{std::move(key), std::move(v)});
}

void GgufWriter::setUint8(std::string key, uint8_t v) {
  setValue(std::move(key), Value::ofUint(ValueType::U8, v));
}
void GgufWriter::setUint32(std::string key, uint32_t v) {
  setValue(std::move(key), Value::ofUint(ValueType::U32, v));
}
void GgufWriter::setInt32(std::string key, int32_t v) {
  setValue(std::move(key), Value::ofInt(ValueType::I32, v));
}
void GgufWriter::setUint64(std::string key, uint64_t v) {
  setValue(std::move(key), Value::ofUint(ValueType::U64, v));
}
void GgufWriter::setFloat32(std::string key, float v) {
  setValue(std::move(key), Value::ofFloat(ValueType::F32, v));
}
void GgufWriter::setBool(std::string key, bool v) { setValue(std::move(key), Value::ofBool(v)); }
void GgufWriter::setString(std::string key, std::string v) {
  setValue(std::move(key), Value::ofString(std::move(v)));
}

void GgufWriter::setStringArray(std::string key, const std::vector<std::string>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (const std::string& s : v) elems.push_back(Value::ofString(s));
  setValue(std::move(key), Value::ofArray(ValueType::String, std::move(elems)));
}

void GgufWriter::setFloat32Array(std::string key, const std::vector<float>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (float f : v) elems.push_back(Value::ofFloat(ValueType::F32, f));
  setValue(std::move(key), Value::ofArray(ValueType::F32, std::move(elems)));
}

void GgufWriter::setInt32Array(std::string key, const std::vector<int32_t>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (int32_t i : v) elems.push_back(Value::ofInt(ValueType::I32, i));
  setValue(std::move(key), Value::ofArray(ValueType::I32, std::move(elems)));
}

void GgufWriter::setAlignment(uint32_t alignment) { setUint32("general.alignment", alignment); }

// ---- tensors --------------------------------------------------------------

void GgufWriter::addTensor(std::string name, std::vector<uint64_t> dims, TensorType type,
                           std::vector<uint8_t> bytes) {
  checkTensorShape(name, dims, type);
  const uint64_t nbytes = tensorBytes(name, dims, type);
  if (bytes.size() != nbytes) {
    throw GgufError("GgufWriter: tensor '" + name + "' has " + std::to_string(bytes.size()) +
                    " bytes, its type and dims need " + std::to_string(nbytes));
  }
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) throw GgufError("GgufWriter: duplicate tensor '" + name + "'");
  }
  tensors_.push_back(
      PendingTensor{std::move(name), std::move(dims), type, std::move(bytes), nullptr, nbytes});
}

void GgufWriter::addTensorGenerated(std::string name, std::vector<uint64_t> dims, TensorType type,
                                    std::function<void(std::span<uint8_t> dst)> fill) {
  checkTensorShape(name, dims, type);
  if (!fill) throw GgufError("GgufWriter: tensor '" + name + "' has no fill function");
  const uint64_t nbytes = tensorBytes(name, dims, type);
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) throw GgufError("GgufWriter: duplicate tensor '" + name + "'");
  }
  tensors_.push_back(PendingTensor{std::move(name), std::move(dims), type, {}, std::move(fill), nbytes});
}

// ---- serialisation --------------------------------------------------------

namespace {

// Offsets of each tensor from the start of the data section, in insertion order.
template <typename Tensors>
std::vector<uint64_t> layoutOffsets(const Tensors& tensors, uint64_t alignment) {
  std::vector<uint64_t> offsets;
  offsets.reserve(tensors.size());
  uint64_t next = 0;
  for (const auto& t : tensors) {
    offsets.push_back(next);
    next = alignUpTo(next + t.nbytes, alignment);
  }
  return offsets;
}

// Header, metadata and tensor infos, padded to the alignment: everything before the data.
template <typename Tensors>
std::vector<uint8_t> encodeHead(const std::vector<KeyValue>& kv, const Tensors& tensors,
                                const std::vector<uint64_t>& offsets, uint64_t alignment) {
  std::vector<uint8_t> out;
  ByteWriter w(out);
  w.put<uint32_t>(kMagic);
  w.put<uint32_t>(kVersion);
  w.put<uint64_t>(tensors.size());
  w.put<uint64_t>(kv.size());
  for (const KeyValue& e : kv) {
    w.putString(e.key);
    w.put<uint32_t>(static_cast<uint32_t>(e.value.type));
    putValue(w, e.value);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    w.putString(tensors[i].name);
    w.put<uint32_t>(static_cast<uint32_t>(tensors[i].dims.size()));
    for (uint64_t d : tensors[i].dims) w.put<uint64_t>(d);
    w.put<uint32_t>(static_cast<uint32_t>(tensors[i].type));
    w.put<uint64_t>(offsets[i]);
  }
  w.padTo(alignment);
  return out;
}

}  // namespace

std::vector<uint8_t> GgufWriter::toBytes() const {
  const auto offsets = layoutOffsets(tensors_, alignment_);
  std::vector<uint8_t> out = encodeHead(kv_, tensors_, offsets, alignment_);
  const size_t data_start = out.size();
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const PendingTensor& t = tensors_[i];
    out.resize(data_start + offsets[i], 0);
    if (t.fill) {
      out.resize(data_start + offsets[i] + t.nbytes, 0);
      t.fill(std::span<uint8_t>(out.data() + data_start + offsets[i], t.nbytes));
    } else {
      out.insert(out.end(), t.bytes.begin(), t.bytes.end());
    }
  }
  ByteWriter(out).padTo(alignment_);
  return out;
}

void GgufWriter::writeFile(const std::string& path) const {
  const auto offsets = layoutOffsets(tensors_, alignment_);
  TempFile file(path);
  const std::vector<uint8_t> head = encodeHead(kv_, tensors_, offsets, alignment_);
  file.write(head.data(), head.size());

  uint64_t written = 0;         // bytes of the data section so far
  std::vector<uint8_t> buffer;  // one generated tensor at a time
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const PendingTensor& t = tensors_[i];
    file.writeZeros(offsets[i] - written);
    if (t.fill) {
      buffer.assign(t.nbytes, 0);
      t.fill(std::span<uint8_t>(buffer.data(), buffer.size()));
      file.write(buffer.data(), buffer.size());
      std::vector<uint8_t>().swap(buffer);  // release before the next tensor
    } else {
      file.write(t.bytes.data(), t.bytes.size());
    }
    written = offsets[i] + t.nbytes;
  }
  file.writeZeros(alignUpTo(written, alignment_) - written);
  file.commit();
}

void GgufWriter::writeLayoutOnly(const std::string& path) const {
  const auto offsets = layoutOffsets(tensors_, alignment_);
  const std::vector<uint8_t> head = encodeHead(kv_, tensors_, offsets, alignment_);
  {
    TempFile file(path);
    file.write(head.data(), head.size());
    file.commit();
  }
  std::error_code ec;
  std::filesystem::resize_file(path, head.size() + dataSectionBytes(), ec);
  if (ec) throw GgufError("cannot size " + path + ": " + ec.message());
}

}  // namespace moe::gguf
