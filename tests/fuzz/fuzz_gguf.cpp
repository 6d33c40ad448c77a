// libFuzzer target for the GGUF reader and the tokenizer-metadata reader.
// Every input must either parse or throw GgufError; ASan/UBSan (the fuzz build
// enables both) turn any out-of-bounds read or overflow into a crash.
// Build and run: docs/FUZZING.md.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "models/gguf.h"
#include "models/vocab.h"

namespace {

using namespace moe::gguf;

// Calls every typed getter on every key, so conversions see hostile values too.
void touchMetadata(const GgufFile& f) {
  for (const KeyValue& kv : f.metadata()) {
    const std::string& k = kv.key;
    auto swallow = [](auto&& fn) {
      try {
        fn();
      } catch (const GgufError&) {
      }
    };
    swallow([&] { (void)f.getUint(k); });
    swallow([&] { (void)f.getInt(k); });
    swallow([&] { (void)f.getFloat(k); });
    swallow([&] { (void)f.getBool(k); });
    swallow([&] { (void)f.getString(k); });
    swallow([&] { (void)f.getStringArray(k); });
    swallow([&] { (void)f.getFloatArray(k); });
    swallow([&] { (void)f.getIntArray(k); });
    (void)f.find(k);
  }
}

// Reads the first and last byte of each tensor (ASan checks the span is real).
uint32_t touchTensors(const GgufFile& f) {
  uint32_t sum = 0;
  for (const TensorInfo& t : f.tensors()) {
    (void)t.nElements();
    (void)t.rowBytes();
    if (f.findTensor(t.name) != &t) __builtin_trap();
    auto data = f.tensorData(t);
    if (data.size() != t.nbytes) __builtin_trap();
    if (!data.empty()) sum += data.front() + data.back();
  }
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    GgufFile f = GgufFile::fromBytes(std::vector<uint8_t>(data, data + size));
    touchMetadata(f);
    volatile uint32_t sink = touchTensors(f);
    (void)sink;
    try {
      (void)moe::VocabData::fromGguf(f);
    } catch (const GgufError&) {
    }
  } catch (const GgufError&) {
  }
  return 0;
}
