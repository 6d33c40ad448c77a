// Where the transfer worker reads an expert's bytes from: one expert = kChunks
// chunks (gate, up, down) at chunkOffset(c) inside expertData(), expertBytes()
// long in all (padding included). HostExpertStore implements it; tests use a fake.
#pragma once

#include <cstddef>
#include <cstdint>

namespace moe {

class ExpertBytesSource {
 public:
  static constexpr int kChunks = 3;  // 0 gate, 1 up, 2 down
  virtual ~ExpertBytesSource() = default;
  virtual const uint8_t* expertData(int layer, int expert) const = 0;
  virtual size_t chunkOffset(int chunk) const = 0;
  virtual size_t chunkBytes(int chunk) const = 0;
  virtual size_t expertBytes() const = 0;
};

}  // namespace moe
