// libFuzzer target for the GGUF reader and the tokenizer-metadata reader.
// Every input must either parse or throw GgufError; ASan/UBSan (the fuzz build
// enables both) turn any out-of-bounds read or overflow into a crash. Accepted
// inputs are also rewritten with GgufWriter and must parse back identically.
// Build and run: docs/FUZZING.md.
#include <algorithm>
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

// Whatever the reader accepts, the writer must reproduce: rewrite the file and parse
// it again; metadata and tensors must come back identical. (The writer refuses
// alignments below 8, which the reader accepts: those files are skipped.)
void rewriteAndCompare(const GgufFile& f) {
  GgufWriter w;
  try {
    for (const KeyValue& kv : f.metadata()) w.setValue(kv.key, kv.value);
  } catch (const GgufError&) {
    if (f.alignment() < 8) return;
    __builtin_trap();
  }
  for (const TensorInfo& t : f.tensors()) {
    auto d = f.tensorData(t);
    w.addTensor(t.name, t.dims, t.type, std::vector<uint8_t>(d.begin(), d.end()));
  }
  const GgufFile g = GgufFile::fromBytes(w.toBytes());
  if (g.metadata().size() != f.metadata().size() || g.tensors().size() != f.tensors().size())
    __builtin_trap();
  for (size_t i = 0; i < f.metadata().size(); ++i) {
    if (g.metadata()[i].key != f.metadata()[i].key ||
        g.metadata()[i].value.type != f.metadata()[i].value.type) {
      __builtin_trap();
    }
  }
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const TensorInfo& a = f.tensors()[i];
    const TensorInfo& b = g.tensors()[i];
    if (a.name != b.name || a.dims != b.dims || a.type != b.type || a.nbytes != b.nbytes) __builtin_trap();
    auto da = f.tensorData(a);
    auto db = g.tensorData(b);
    if (!std::equal(da.begin(), da.end(), db.begin(), db.end())) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    GgufFile f = GgufFile::fromBytes(std::vector<uint8_t>(data, data + size));
    touchMetadata(f);
    volatile uint32_t sink = touchTensors(f);
    (void)sink;
    rewriteAndCompare(f);
    try {
      (void)moe::VocabData::fromGguf(f);
    } catch (const GgufError&) {
    }
  } catch (const GgufError&) {
  }
  return 0;
}
