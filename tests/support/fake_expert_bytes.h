// An ExpertBytesSource of made-up experts for the scheduling tests: distinct
// bytes per (layer, expert, offset), chunks of 100 / 60 / 40 bytes at 256-byte
// offsets in a 768-byte expert.
#pragma once

#include <string>
#include <vector>

#include "offload/expert_bytes_source.h"

namespace moe::test {

class FakeExpertBytes final : public ExpertBytesSource {
 public:
  FakeExpertBytes(int layers, int experts) : experts_(experts) {
    data_.resize(size_t(layers * experts) * kExpertBytes);
    for (size_t i = 0; i < data_.size(); ++i) data_[i] = uint8_t((i * 7 + i / kExpertBytes * 131 + 1) & 0xff);
  }
  const uint8_t* expertData(int layer, int expert) const override {
    return data_.data() + size_t(layer * experts_ + expert) * kExpertBytes;
  }
  size_t chunkOffset(int c) const override { return size_t(c) * 256; }
  size_t chunkBytes(int c) const override { return kChunkBytes[c]; }
  size_t expertBytes() const override { return kExpertBytes; }
  size_t chunkSum() const { return kSum; }
  // Which (layer, expert) a source pointer belongs to, as "L.E".
  std::string whose(const void* src) const {
    const size_t id = size_t(static_cast<const uint8_t*>(src) - data_.data()) / kExpertBytes;
    return std::to_string(id / experts_) + "." + std::to_string(id % experts_);
  }

  static constexpr size_t kChunkBytes[kChunks] = {100, 60, 40};
  static constexpr size_t kExpertBytes = 768;
  static constexpr size_t kSum = 200;

 private:
  int experts_;
  std::vector<uint8_t> data_;
};

}  // namespace moe::test
