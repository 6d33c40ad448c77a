// SHA-256 (FIPS 180-4), Qt-free, the project's one implementation: the model
// identity that links a GGUF file to its trace files and trained predictors, and
// the download checksum (app/qt/file_hasher.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace moe {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const uint8_t> bytes);
  // Lower-case hex digest; the object is spent afterwards.
  std::string hexDigest();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256Hex(std::span<const uint8_t> bytes);
// Streams the file (never read whole); throws std::runtime_error when unreadable.
std::string sha256OfFile(const std::string& path);

}  // namespace moe
