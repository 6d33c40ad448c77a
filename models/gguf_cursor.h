// The GGUF reader's bounds-checked cursor over an untrusted file: every read checks
// the bytes left first and names the field it was reading when it throws.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "models/gguf.h"

namespace moe::gguf {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

inline std::string quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

// Names the field being read, for error messages only. Built from views so that the hot
// path (a 150k-entry string array) creates no strings; the text is formed on failure.
struct Field {
  const char* what;
  std::string_view name = {};  // key or tensor name, quoted when present
  const char* suffix = "";
  int64_t index = -1;  // metadata entry / tensor number, when known

  std::string describe() const {
    std::string s = what;
    if (index >= 0) s += " " + std::to_string(index);
    if (!name.empty()) s += " " + quoted(name);
    return s + suffix;
  }
};

// Bounds-checked little-endian reader over [base, base + size).
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  // Throws unless n more bytes exist.
  void need(uint64_t n, const Field& f, const char* extra = "") const {
    if (n > remaining()) {
      throw GgufError("truncated file: " + f.describe() + extra + " needs " + std::to_string(n) +
                      " bytes at offset " + std::to_string(pos_) + ", only " + std::to_string(remaining()) +
                      " left");
    }
  }

  template <typename T>
  T read(const Field& f) {
    need(sizeof(T), f);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));  // GGUF is little-endian, as are our targets
    pos_ += sizeof(T);
    return v;
  }

  std::string readString(const Field& f) {
    uint64_t len = 0;
    if (remaining() >= sizeof len) {
      std::memcpy(&len, base_ + pos_, sizeof len);
      pos_ += sizeof len;
    } else {
      need(sizeof len, f, " length");
    }
    if (len > remaining()) {
      need(len, f, (" (" + std::to_string(len) + " bytes)").c_str());
    }
    std::string s(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

}  // namespace moe::gguf
