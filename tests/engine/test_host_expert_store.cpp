// HostExpertStore: every routed expert's three matrices copied out of the file
// into one contiguous, chunk-aligned layout, byte for byte, and the engine
// computes the same logits from the store as from the file.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "offload/host_expert_store.h"
#include "support/engine_fixture.h"

using namespace moe;

namespace {

// Serves experts from a HostExpertStore (the layout a device slot will hold).
class StoreSource : public ExpertSource {
 public:
  explicit StoreSource(const HostExpertStore& s) : store_(s) {}
  std::vector<ExpertRef> acquire(int layer, std::span<const int> experts) override {
    std::vector<ExpertRef> out;
    for (int e : experts) out.push_back({e, store_.viewAt(layer, store_.expertData(layer, e))});
    return out;
  }
  void release(int) override {}

 private:
  const HostExpertStore& store_;
};

const WeightView& chunk(const ExpertWeights& w, int c) { return c == 0 ? w.gate : c == 1 ? w.up : w.down; }

// One arch of copiesEveryExpertByteForByte: a failed check ends the arch, and the next one still runs.
void copiesEveryExpertByteForByte(const std::string& arch) {
  EngineFixture f(synth::tinySpec(arch));
  HostExpertStore store(*f.model);
  ASSERT_EQ(store.totalBytes(), HostExpertStore::bytesNeeded(*f.model));
  const auto& table = f.model->hostExperts();
  int moe_layers = 0;
  for (int il = 0; il < f.model->config().n_layer; ++il) {
    ASSERT_EQ(store.hasLayer(il), !table[il].empty());
    if (table[il].empty()) continue;
    ++moe_layers;
    for (int e = 0; e < store.experts(); ++e) {
      const uint8_t* base = store.expertData(il, e);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(base) % HostExpertStore::kChunkAlignment, uintptr_t(0));
      for (int c = 0; c < HostExpertStore::kChunks; ++c) {
        const WeightView& w = chunk(table[il][e], c);
        ASSERT_EQ(store.chunkOffset(c) % HostExpertStore::kChunkAlignment, size_t(0));
        ASSERT_TRUE(std::memcmp(base + store.chunkOffset(c), w.data, w.bytes()) == 0);
        const ExpertWeights view = store.viewAt(il, base);
        const WeightView& v = chunk(view, c);
        ASSERT_EQ(v.data, base + store.chunkOffset(c));
        ASSERT_EQ(v.type, w.type);
        ASSERT_EQ(v.rows, w.rows);
        ASSERT_EQ(v.cols, w.cols);
      }
    }
  }
  ASSERT_EQ(store.totalBytes(), store.expertBytes() * store.experts() * moe_layers);
}

// One arch of sameLogitsFromTheStore.
void sameLogitsFromTheStore(const std::string& arch) {
  EngineFixture f(synth::tinySpec(arch));
  HostExpertStore store(*f.model);
  StoreSource source(store);
  const int32_t tokens[] = {5, 9, 2, 77, 31};
  std::vector<float> from_file, from_store;
  f.transformer()->forward(tokens, from_file, true);
  f.transformer(256, &source)->forward(tokens, from_store, true);
  ASSERT_TRUE(from_file == from_store);  // same bytes, same arithmetic: bit-identical
}

}  // namespace

// Every case below that takes an arch runs once per synthetic arch.
TEST(HostExpertStore, copiesEveryExpertByteForByte) {
  for (const std::string& arch : synth::supportedArchs()) {
    SCOPED_TRACE(arch);
    copiesEveryExpertByteForByte(arch);
  }
}

TEST(HostExpertStore, sameLogitsFromTheStore) {
  for (const std::string& arch : synth::supportedArchs()) {
    SCOPED_TRACE(arch);
    sameLogitsFromTheStore(arch);
  }
}

TEST(HostExpertStore, refusesWhatDoesNotFit) {
  try {
    HostExpertStore::checkFits(30'000'000'000ull, 16'000'000'000ull);
    FAIL() << "no error";
  } catch (const HostMemoryError& e) {
    const std::string msg = e.what();
    ASSERT_TRUE(msg.find("30.00 GB") != std::string::npos && msg.find("16.00 GB") != std::string::npos)
        << msg;
  }
  HostExpertStore::checkFits(1'000'000'000ull, 0);  // unknown: not checked
  HostExpertStore::checkFits(1'000'000'000ull, 4'000'000'000ull);
  ASSERT_TRUE(HostExpertStore::availableRam() > 0);  // Linux: /proc/meminfo
}

TEST(HostExpertStore, badIdsAreErrors) {
  EngineFixture f(synth::tinySpec("deepseek"));  // layer 0 is dense
  HostExpertStore store(*f.model);
  ASSERT_TRUE(!store.hasLayer(0));
  ASSERT_THROW(store.expertData(0, 0), std::out_of_range);
  ASSERT_THROW(store.expertData(1, store.experts()), std::out_of_range);
}
