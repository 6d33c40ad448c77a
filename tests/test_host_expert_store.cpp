// HostExpertStore: every routed expert's three matrices copied out of the file
// into one contiguous, chunk-aligned layout, byte for byte, and the engine
// computes the same logits from the store as from the file.
#include <QtTest>

#include <cstring>

#include "engine_fixture.h"
#include "offload/host_expert_store.h"

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

}  // namespace

class HostExpertStoreTest : public QObject {
  Q_OBJECT
 private slots:
  void archs_data() {
    QTest::addColumn<QString>("arch");
    for (const auto& a : synth::supportedArchs()) QTest::newRow(a.c_str()) << QString::fromStdString(a);
  }

  void copiesEveryExpertByteForByte_data() { archs_data(); }
  void copiesEveryExpertByteForByte() {
    QFETCH(QString, arch);
    EngineFixture f(synth::tinySpec(arch.toStdString()));
    HostExpertStore store(*f.model);
    QCOMPARE(store.totalBytes(), HostExpertStore::bytesNeeded(*f.model));
    const auto& table = f.model->hostExperts();
    int moe_layers = 0;
    for (int il = 0; il < f.model->config().n_layer; ++il) {
      QCOMPARE(store.hasLayer(il), !table[il].empty());
      if (table[il].empty()) continue;
      ++moe_layers;
      for (int e = 0; e < store.experts(); ++e) {
        const uint8_t* base = store.expertData(il, e);
        QCOMPARE(reinterpret_cast<uintptr_t>(base) % HostExpertStore::kChunkAlignment, uintptr_t(0));
        for (int c = 0; c < HostExpertStore::kChunks; ++c) {
          const WeightView& w = chunk(table[il][e], c);
          QCOMPARE(store.chunkOffset(c) % HostExpertStore::kChunkAlignment, size_t(0));
          QVERIFY(std::memcmp(base + store.chunkOffset(c), w.data, w.bytes()) == 0);
          const ExpertWeights view = store.viewAt(il, base);
          const WeightView& v = chunk(view, c);
          QCOMPARE(v.data, base + store.chunkOffset(c));
          QCOMPARE(v.type, w.type);
          QCOMPARE(v.rows, w.rows);
          QCOMPARE(v.cols, w.cols);
        }
      }
    }
    QCOMPARE(store.totalBytes(), store.expertBytes() * store.experts() * moe_layers);
  }

  void sameLogitsFromTheStore_data() { archs_data(); }
  void sameLogitsFromTheStore() {
    QFETCH(QString, arch);
    EngineFixture f(synth::tinySpec(arch.toStdString()));
    HostExpertStore store(*f.model);
    StoreSource source(store);
    const int32_t tokens[] = {5, 9, 2, 77, 31};
    std::vector<float> from_file, from_store;
    f.transformer()->forward(tokens, from_file, true);
    f.transformer(256, &source)->forward(tokens, from_store, true);
    QVERIFY(from_file == from_store);  // same bytes, same arithmetic: bit-identical
  }

  void refusesWhatDoesNotFit() {
    try {
      HostExpertStore::checkFits(30'000'000'000ull, 16'000'000'000ull);
      QFAIL("no error");
    } catch (const HostMemoryError& e) {
      const QString msg = e.what();
      QVERIFY2(msg.contains("30.00 GB") && msg.contains("16.00 GB"), qPrintable(msg));
    }
    HostExpertStore::checkFits(1'000'000'000ull, 0);  // unknown: not checked
    HostExpertStore::checkFits(1'000'000'000ull, 4'000'000'000ull);
    QVERIFY(HostExpertStore::availableRam() > 0);  // Linux: /proc/meminfo
  }

  void badIdsAreErrors() {
    EngineFixture f(synth::tinySpec("deepseek"));  // layer 0 is dense
    HostExpertStore store(*f.model);
    QVERIFY(!store.hasLayer(0));
    QVERIFY_THROWS_EXCEPTION(std::out_of_range, store.expertData(0, 0));
    QVERIFY_THROWS_EXCEPTION(std::out_of_range, store.expertData(1, store.experts()));
  }
};

QTEST_APPLESS_MAIN(HostExpertStoreTest)
#include "test_host_expert_store.moc"
