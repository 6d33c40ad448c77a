// GGUF v3 reader. Layout facts: ggml docs/gguf.md ("File Structure"), summarised in
// shared/GGUF-NOTES.md. The file is untrusted: every read goes through Cursor, which
// checks the remaining bytes first, and every count is checked against the bytes that
// could hold it before anything is allocated for it.
//
// Choices where the spec is silent or loose (documented in docs/FUZZING.md too):
// - Tensors with a zero dimension are rejected: no model needs an empty tensor, and
//   allowing them would make "offset inside the data section" and overlap checks
//   depend on zero-length ranges.
// - general.alignment: any power of two up to kMaxAlignment (1 MiB) is accepted
//   (llama.cpp reads 1, 2, 4 too), although the spec asks writers for a multiple of 8;
//   our writer only writes multiples of 8.
// - Bool values must be 0 or 1; other bytes mean a corrupt file.
// - With no tensors, the padding before the (empty) data section may be missing.
// - Trailing bytes after the last tensor are allowed (writers pad the last tensor).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_set>

#include "models/gguf.h"
#include "models/gguf_cursor.h"
#include "models/gguf_metadata_parser.h"

namespace moe::gguf {

namespace {

bool isPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Rounds v up to a multiple of the power of two a; nullopt on overflow.
std::optional<uint64_t> alignUp(uint64_t v, uint64_t a) {
  const uint64_t rem = v & (a - 1);
  if (rem == 0) return v;
  const uint64_t add = a - rem;
  if (v > std::numeric_limits<uint64_t>::max() - add) return std::nullopt;
  return v + add;
}

// A tensor info needs at least: name length u64, n_dims u32, one dim u64, type u32, offset u64.
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
// A key/value needs at least: key length u64, value type u32, one byte of value.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;

std::string tensorWhere(const std::string& name) { return "tensor " + quoted(name); }

constexpr const char* kNeSuffix[kMaxDims] = {" ne0", " ne1", " ne2", " ne3"};

// Reads the dims of one tensor; returns the element count (checked below 2^63, as ggml
// keeps ne as int64_t).
uint64_t readDims(Cursor& c, TensorInfo& t, const std::string& where) {
  const uint32_t n_dims = c.read<uint32_t>(Field{"tensor", t.name, " n_dims"});
  if (n_dims < 1 || n_dims > kMaxDims) {
    throw GgufError(where + ": n_dims " + std::to_string(n_dims) + " outside 1.." + std::to_string(kMaxDims));
  }
  t.dims.resize(n_dims);
  uint64_t elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    t.dims[d] = c.read<uint64_t>(Field{"tensor", t.name, kNeSuffix[d]});
    if (t.dims[d] == 0) {
      throw GgufError(where + ": ne" + std::to_string(d) + " is 0 (empty tensors are not supported)");
    }
    if (elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / t.dims[d]) {
      throw GgufError(where + ": element count overflows (dims too large)");
    }
    elements *= t.dims[d];
  }
  return elements;
}

// Reads the type and computes the byte size from the block traits (rows x row bytes).
void readTypeAndSize(Cursor& c, TensorInfo& t, uint64_t elements, const std::string& where) {
  const uint32_t type_id = c.read<uint32_t>(Field{"tensor", t.name, " type"});
  const auto traits = typeTraits(type_id);
  if (!traits) throw GgufError(where + ": unknown tensor type id " + std::to_string(type_id));
  t.type = static_cast<TensorType>(type_id);
  if (t.dims[0] % traits->block_elems != 0) {
    throw GgufError(where + ": ne0 " + std::to_string(t.dims[0]) + " is not a multiple of the " +
                    traits->name + " block size " + std::to_string(traits->block_elems));
  }
  const uint64_t row = rowBytes(t.type, t.dims[0]);
  const uint64_t rows = elements / t.dims[0];
  if (row > std::numeric_limits<uint64_t>::max() / rows) throw GgufError(where + ": byte size overflows");
  t.nbytes = row * rows;
}

// One tensor info (gguf.md "gguf_tensor_info_t"): name, n_dims, ne[n_dims], type, offset.
TensorInfo readTensorInfo(Cursor& c, uint64_t index, uint64_t alignment) {
  const uint64_t at = c.pos();
  TensorInfo t;
  t.name = c.readString(Field{"name of tensor", {}, "", static_cast<int64_t>(index)});
  const std::string where = tensorWhere(t.name);
  if (t.name.empty()) {
    throw GgufError("tensor " + std::to_string(index) + " at offset " + std::to_string(at) +
                    " has an empty name");
  }
  if (t.name.size() > kMaxTensorNameBytes) {
    throw GgufError(where + ": name of " + std::to_string(t.name.size()) + " bytes exceeds " +
                    std::to_string(kMaxTensorNameBytes));
  }
  const uint64_t elements = readDims(c, t, where);
  readTypeAndSize(c, t, elements, where);
  t.offset = c.read<uint64_t>(Field{"tensor", t.name, " offset"});
  if (t.offset % alignment != 0) {
    throw GgufError(where + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                    std::to_string(alignment));
  }
  return t;
}

// "[start, end)" in file offsets; exact even where the hostile sum overflows 64 bits.
std::string absoluteRange(uint64_t data_offset, uint64_t offset, uint64_t nbytes) {
  const unsigned __int128 start = static_cast<unsigned __int128>(data_offset) + offset;
  const unsigned __int128 end = start + nbytes;
  auto str = [](unsigned __int128 v) {
    std::string out;
    do {
      out.insert(out.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
      v /= 10;
    } while (v != 0);
    return out;
  };
  return "[" + str(start) + ", " + str(end) + ")";
}

// Every tensor's bytes lie inside the file and no two tensors share a byte.
void checkTensorExtents(const std::vector<TensorInfo>& tensors, uint64_t data_offset, uint64_t file_size) {
  const uint64_t data_size = file_size - data_offset;  // data_offset <= file_size, checked by the caller
  for (const TensorInfo& t : tensors) {
    // Overflow-safe form of data_offset + offset + nbytes <= file_size.
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      throw GgufError(tensorWhere(t.name) + ": data " + absoluteRange(data_offset, t.offset, t.nbytes) +
                      " runs past end of file (size " + std::to_string(file_size) + ")");
    }
  }
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(tensors.size());
  for (const TensorInfo& t : tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    const TensorInfo& cur = *by_offset[i];
    if (cur.offset < prev.offset + prev.nbytes) {  // no overflow: both extents are inside the file
      throw GgufError(tensorWhere(cur.name) + ": data at offset " + std::to_string(cur.offset) +
                      " overlaps " + tensorWhere(prev.name) + " [" + std::to_string(prev.offset) + ", " +
                      std::to_string(prev.offset + prev.nbytes) + ")");
    }
  }
}

}  // namespace

// ---- storage --------------------------------------------------------------

struct GgufFile::Storage {
  std::vector<uint8_t> owned;  // fromBytes
  void* map = nullptr;         // open: the read-only mapping
  size_t map_size = 0;
  struct stat identity {};  // open: the file as it was mapped

  ~Storage() {
    if (map != nullptr) munmap(map, map_size);
  }
};

GgufFile::GgufFile() = default;
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.path_ = path;
  f.storage_ = std::make_unique<Storage>();

  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; the
  // file type is checked right after, and a regular file ignores the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw GgufError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw GgufError(path + ": not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    throw GgufError(path + ": empty file (no GGUF header)");
  }
  void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) throw GgufError(path + ": mmap failed: " + std::strerror(map_errno));

  f.storage_->map = map;
  f.storage_->map_size = static_cast<size_t>(st.st_size);
  f.storage_->identity = st;
  f.base_ = static_cast<const uint8_t*>(map);
  f.size_ = static_cast<uint64_t>(st.st_size);
  try {
    f.parse();
  } catch (const GgufError& e) {
    throw GgufError(path + ": " + e.what());
  }
  return f;
}

std::optional<std::string> GgufFile::changedOnDisk() const {
  if (path_.empty() || !storage_ || storage_->map == nullptr) return std::nullopt;
  const struct stat& was = storage_->identity;
  struct stat now {};
  if (::stat(path_.c_str(), &now) != 0) return path_ + " is gone (" + std::strerror(errno) + ")";
  if (now.st_dev != was.st_dev || now.st_ino != was.st_ino) return path_ + " was replaced by another file";
  if (now.st_size != was.st_size)
    return path_ + " changed size (" + std::to_string(was.st_size) + " -> " + std::to_string(now.st_size) +
           " bytes)";
  if (now.st_mtim.tv_sec != was.st_mtim.tv_sec || now.st_mtim.tv_nsec != was.st_mtim.tv_nsec)
    return path_ + " was rewritten";
  return std::nullopt;
}

GgufFile GgufFile::fromBytes(std::vector<uint8_t> bytes) {
  GgufFile f;
  f.storage_ = std::make_unique<Storage>();
  f.storage_->owned = std::move(bytes);
  f.base_ = f.storage_->owned.data();
  f.size_ = f.storage_->owned.size();
  f.parse();
  return f;
}

// ---- parsing --------------------------------------------------------------

void GgufFile::parse() {
  Cursor c(base_, size_);

  // Header: magic, version, tensor_count, kv_count (gguf.md "File Structure").
  const uint32_t magic = c.read<uint32_t>(Field{"magic"});
  if (magic != kMagic) throw GgufError("not a GGUF file (bad magic)");
  version_ = c.read<uint32_t>(Field{"version"});
  if (version_ != kVersion) {
    throw GgufError("unsupported GGUF version " + std::to_string(version_) + " (need " +
                    std::to_string(kVersion) + ")");
  }
  const uint64_t tensor_count = c.read<uint64_t>(Field{"tensor_count"});
  const uint64_t kv_count = c.read<uint64_t>(Field{"kv_count"});
  if (kv_count > c.remaining() / kMinKeyValueBytes) {
    throw GgufError("kv_count " + std::to_string(kv_count) + " cannot fit in the " +
                    std::to_string(c.remaining()) + " bytes after the header");
  }
  if (tensor_count > c.remaining() / kMinTensorInfoBytes) {
    throw GgufError("tensor_count " + std::to_string(tensor_count) + " cannot fit in the " +
                    std::to_string(c.remaining()) + " bytes after the header");
  }

  // Metadata.
  MetadataParser meta(c);
  std::unordered_set<std::string> keys;
  kv_.reserve(kv_count);
  for (uint64_t i = 0; i < kv_count; ++i) {
    const uint64_t at = c.pos();
    std::string key = c.readString(Field{"key of metadata entry", {}, "", static_cast<int64_t>(i)});
    if (key.empty())
      throw GgufError("metadata entry " + std::to_string(i) + " at offset " + std::to_string(at) +
                      " has an empty key");
    if (!keys.insert(key).second) {
      throw GgufError("duplicate metadata key " + quoted(key) + " at offset " + std::to_string(at));
    }
    const ValueType type = meta.readType(key, "value type");
    Value value = meta.readValue(type, key, 0);
    kv_.push_back(KeyValue{std::move(key), std::move(value)});
  }

  // general.alignment (gguf.md: u32; we require a power of two as llama.cpp does).
  if (const Value* a = find("general.alignment")) {
    if (a->type != ValueType::U32) {
      throw GgufError(std::string("general.alignment must be u32, found ") + valueTypeName(a->type));
    }
    alignment_ = *a->asUint();
    if (!isPowerOfTwo(alignment_)) {
      throw GgufError("general.alignment " + std::to_string(alignment_) + " is not a power of two");
    }
    if (alignment_ > kMaxAlignment) {
      throw GgufError("general.alignment " + std::to_string(alignment_) + " exceeds the supported maximum " +
                      std::to_string(kMaxAlignment));
    }
  }

  // Tensor infos.
  if (tensor_count > c.remaining() / kMinTensorInfoBytes) {
    throw GgufError("tensor_count " + std::to_string(tensor_count) + " cannot fit in the " +
                    std::to_string(c.remaining()) + " bytes after the metadata");
  }
  tensors_.reserve(tensor_count);
  tensor_index_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    const uint64_t at = c.pos();
    TensorInfo t = readTensorInfo(c, i, alignment_);
    if (!tensor_index_.emplace(t.name, tensors_.size()).second) {
      throw GgufError("duplicate tensor name " + quoted(t.name) + " at offset " + std::to_string(at));
    }
    tensors_.push_back(std::move(t));
  }

  // Data section: starts at the next multiple of the alignment.
  const auto data_start = alignUp(c.pos(), alignment_);
  if (!data_start || *data_start > size_) {
    if (!tensors_.empty()) {
      throw GgufError("data section (aligned to " + std::to_string(alignment_) + " after offset " +
                      std::to_string(c.pos()) + ") starts past end of file (size " + std::to_string(size_) +
                      ")");
    }
    data_offset_ = size_;  // no tensors: a writer may omit the final padding
  } else {
    data_offset_ = *data_start;
  }
  checkTensorExtents(tensors_, data_offset_, size_);
}

}  // namespace moe::gguf

namespace moe::gguf {

// ---- look-ups -------------------------------------------------------------

namespace {

[[noreturn]] void wrongType(std::string_view key, const Value& v, const char* wanted) {
  std::string found = valueTypeName(v.type);
  if (v.type == ValueType::Array) found += std::string(" of ") + valueTypeName(v.array_type);
  throw GgufError("key '" + std::string(key) + "': expected " + wanted + ", found " + found);
}

const std::vector<Value>& arrayOf(std::string_view key, const Value& v, const char* wanted) {
  const std::vector<Value>* arr = v.asArray();
  if (arr == nullptr) wrongType(key, v, wanted);
  return *arr;
}

}  // namespace

const Value* GgufFile::find(std::string_view key) const {
  for (const KeyValue& kv : kv_) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

std::optional<uint64_t> GgufFile::getUint(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  auto u = v->asUint();
  if (!u) wrongType(key, *v, "a non-negative integer");
  return u;
}

std::optional<int64_t> GgufFile::getInt(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  auto i = v->asInt();
  if (!i) wrongType(key, *v, "an integer that fits i64");
  return i;
}

std::optional<double> GgufFile::getFloat(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  auto f = v->asFloat();
  if (!f) wrongType(key, *v, "a number");
  return f;
}

std::optional<bool> GgufFile::getBool(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  auto b = v->asBool();
  if (!b) wrongType(key, *v, "a bool");
  return b;
}

std::optional<std::string> GgufFile::getString(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const std::string* s = v->asString();
  if (s == nullptr) wrongType(key, *v, "a string");
  return *s;
}

std::optional<std::vector<std::string>> GgufFile::getStringArray(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const auto& arr = arrayOf(key, *v, "an array of strings");
  if (v->array_type != ValueType::String) wrongType(key, *v, "an array of strings");
  std::vector<std::string> out;
  out.reserve(arr.size());
  for (const Value& e : arr) out.push_back(*e.asString());  // element type checked above
  return out;
}

std::optional<std::vector<double>> GgufFile::getFloatArray(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const auto& arr = arrayOf(key, *v, "an array of numbers");
  std::vector<double> out;
  out.reserve(arr.size());
  for (const Value& e : arr) {
    auto f = e.asFloat();
    if (!f) wrongType(key, *v, "an array of numbers");
    out.push_back(*f);
  }
  return out;
}

std::optional<std::vector<int64_t>> GgufFile::getIntArray(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  const auto& arr = arrayOf(key, *v, "an array of integers");
  std::vector<int64_t> out;
  out.reserve(arr.size());
  for (const Value& e : arr) {
    auto i = e.asInt();
    if (!i) wrongType(key, *v, "an array of integers that fit i64");
    out.push_back(*i);
  }
  return out;
}

const TensorInfo* GgufFile::findTensor(std::string_view name) const {
  auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> GgufFile::tensorData(const TensorInfo& t) const {
  // The reader checked its own tensors; re-check so a caller's hand-made TensorInfo
  // cannot read outside the file either.
  const uint64_t data_size = size_ - data_offset_;
  if (t.offset > data_size || t.nbytes > data_size - t.offset) {
    throw GgufError("tensor '" + t.name + "': data outside the file");
  }
  return {base_ + data_offset_ + t.offset, static_cast<size_t>(t.nbytes)};
}

}  // namespace moe::gguf
