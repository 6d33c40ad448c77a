// The model catalog: the built-in one parses and names real shapes; bad entries
// fail with the entry and field named; a missing checksum is said plainly; the fit
// estimate from shape + quant matches a published file size and moves with the budget.
#include <QtTest>

#include "app/qt/model_catalog.h"

using namespace moe;

namespace {

// The fit of `e` at a VRAM budget on a GPU of that size (the plan every view resolves).
CatalogFit fitAtBudget(const CatalogEntry& e, uint64_t budget, uint64_t ram) {
  return estimateCatalogFit(e, {BudgetSetting::vramBytes(budget), OffloadPolicy::kProactive, 4096, false},
                            DeviceMemory{true, budget, budget, {}}, ram);
}

}  // namespace

class TestDownloadCatalog : public QObject {
  Q_OBJECT

 private slots:
  void builtInParses() {
    const ModelCatalog c = ModelCatalog::builtIn();
    QVERIFY(c.entries().size() >= 5);
    for (const auto& e : c.entries()) {
      QVERIFY2(e.url.startsWith(QStringLiteral("https://huggingface.co/")), qPrintable(e.url));
      QVERIFY(e.fileName().endsWith(QStringLiteral(".gguf"), Qt::CaseInsensitive));
      QVERIFY(!e.licence.isEmpty());
      // Every entry's fit can be estimated before download.
      const CatalogFit f = fitAtBudget(e, 24'000'000'000ull, 64ull << 30);
      QVERIFY(f.plan.fit.total_experts > 0);
      QVERIFY(f.estimated_file_bytes > 1'000'000'000ull);
    }
  }

  void missingChecksumIsSaidPlainly() {
    CatalogEntry e;
    e.sha256.clear();
    e.size_bytes = 1000;
    QCOMPARE(e.checksumNote(), QStringLiteral("no published checksum: size checked only"));
    e.size_bytes = -1;
    QVERIFY(e.checksumNote().startsWith(QStringLiteral("no published checksum")));
    e.sha256 = QString(64, QLatin1Char('a'));
    QCOMPARE(e.checksumNote(), QStringLiteral("SHA-256 checked"));
  }

  void badEntriesNameTheField_data() {
    QTest::addColumn<QByteArray>("json");
    QTest::addColumn<QString>("expected");
    const QByteArray ok =
        "\"id\":\"x\",\"name\":\"X\",\"family\":\"olmoe\",\"quant\":\"Q8_0\",\"shape\":\"OLMoE\",\"licence\":"
        "\"MIT\"";
    QTest::newRow("not json") << QByteArray("{") << "not JSON";
    QTest::newRow("no models") << QByteArray("{}") << "no 'models' array";
    QTest::newRow("no url") << QByteArray("{\"models\":[{" + ok + "}]}") << "entry 'x': 'url' missing";
    QTest::newRow("ftp url") << QByteArray("{\"models\":[{" + ok + ",\"url\":\"ftp://a/b.gguf\"}]}")
                             << "not an http(s) URL";
    QTest::newRow("bad sha") << QByteArray("{\"models\":[{" + ok +
                                           ",\"url\":\"https://a/b.gguf\",\"sha256\":\"12\"}]}")
                             << "'sha256' is not 64 hex digits";
    QTest::newRow("bad shape") << QByteArray(
                                      "{\"models\":[{\"id\":\"x\",\"name\":\"X\",\"family\":\"f\",\"quant\":"
                                      "\"Q8_0\",\"shape\":\"Nope\","
                                      "\"licence\":\"MIT\",\"url\":\"https://a/b.gguf\"}]}")
                               << "unknown shape 'Nope'";
    QTest::newRow("negative size") << QByteArray("{\"models\":[{" + ok +
                                                 ",\"url\":\"https://a/b.gguf\",\"size_bytes\":-5}]}")
                                   << "'size_bytes' must be a positive number or null";
    QTest::newRow("duplicate") << QByteArray("{\"models\":[{" + ok + ",\"url\":\"https://a/b.gguf\"},{" + ok +
                                             ",\"url\":\"https://a/c.gguf\"}]}")
                               << "duplicate id";
  }
  void badEntriesNameTheField() {
    QFETCH(QByteArray, json);
    QFETCH(QString, expected);
    try {
      ModelCatalog::fromJson(json);
      QFAIL("accepted a bad catalog");
    } catch (const CatalogError& e) {
      QVERIFY2(QString::fromUtf8(e.what()).contains(expected), e.what());
    }
  }

  // The size model (shape preset x quant block sizes) against a published figure:
  // Qwen3-30B-A3B-Q8_0.gguf is 32,483,931,648 bytes (docs/DOWNLOADS.md).
  void estimatedSizeMatchesPublishedFile() {
    const ModelCatalog c = ModelCatalog::builtIn();
    const CatalogEntry* e = c.find(QStringLiteral("qwen3-30b-a3b-q8_0"));
    QVERIFY(e);
    QCOMPARE(e->size_bytes, qint64(32483931648));
    const CatalogFit f = fitAtBudget(*e, 24'000'000'000ull, 64ull << 30);
    const double rel =
        std::abs(double(f.estimated_file_bytes) - double(e->size_bytes)) / double(e->size_bytes);
    qInfo("Qwen3-30B-A3B Q8_0: estimated %llu bytes, published %lld (%.2f%% off)",
          (unsigned long long)f.estimated_file_bytes, (long long)e->size_bytes, 100 * rel);
    QVERIFY2(rel < 0.02, "the size model is more than 2% off a published file size");
  }

  // Qwen3.6-35B-A3B: only its 10 full-attention layers keep KV rows, its 30 delta-net
  // layers a state; the size model counts the delta-net layers' own matrices. Two
  // published sizes of a Qwen3.6-35B-A3B-Q8_0.gguf: 36,903,140,320 bytes (unsloth's, the
  // catalog's URL) and 37,801,097,504 (one that also carries the MTP layer, which the
  // catalog's size model leaves out as the engine does).
  void qwen35EntryCountsItsLayerKinds() {
    const ModelCatalog c = ModelCatalog::builtIn();
    const CatalogEntry* e = c.find(QStringLiteral("qwen3.6-35b-a3b-q8_0"));
    QVERIFY(e);
    const CatalogFit f = fitAtBudget(*e, 24'000'000'000ull, 64ull << 30);
    QCOMPARE(f.plan.fit.kv_bytes, uint64_t(2) * 10 * 4096 * 512 * 2);
    QCOMPARE(f.plan.fit.recurrent_state_bytes,
             uint64_t(1 + moe::kRecurrentSnapshots) * 30 * (3 * 8192 + 32 * 128 * 128) * 4);
    QCOMPARE(f.plan.fit.total_experts, uint64_t(40 * 256));
    const double rel = std::abs(double(f.estimated_file_bytes) - 36903140320.0) / 36903140320.0;
    qInfo("Qwen3.6-35B-A3B Q8_0: estimated %llu bytes, published 36903140320 (%.2f%% off)",
          (unsigned long long)f.estimated_file_bytes, 100 * rel);
    QVERIFY2(rel < 0.02, "the size model is more than 2% off a published file size");
  }

  void fitFollowsTheBudget() {
    const ModelCatalog c = ModelCatalog::builtIn();
    const CatalogEntry* e = c.find(QStringLiteral("mixtral-8x7b-instruct-v0.1-q4_0"));
    QVERIFY(e);
    const CatalogFit small = fitAtBudget(*e, 1'000'000'000ull, 64ull << 30);
    const CatalogFit mid = fitAtBudget(*e, 12'000'000'000ull, 64ull << 30);
    const CatalogFit big = fitAtBudget(*e, 80'000'000'000ull, 64ull << 30);
    QVERIFY(!small.plan.loads());
    QVERIFY(small.summary().startsWith(QStringLiteral("Does not fit")));
    // 1 GB is below what stays on the GPU: the words say that, the same as the settings panel's.
    QVERIFY2(small.summary().contains(QStringLiteral("more than the 1.00 GB budget")),
             qPrintable(small.summary()));
    QVERIFY2(small.shortSummary().startsWith(QStringLiteral("no: needs ")), qPrintable(small.shortSummary()));
    QVERIFY(mid.plan.loads() && !mid.plan.all_experts_fit);
    QVERIFY(mid.plan.cache_slots > 2 && uint64_t(mid.plan.cache_slots) < mid.plan.fit.total_experts);
    QVERIFY(big.plan.all_experts_fit);
    QCOMPARE(mid.plan.fit.total_experts, uint64_t(32 * 8));
    // Pinned host RAM: the expert store against what the machine has.
    const CatalogFit poor = fitAtBudget(*e, 12'000'000'000ull, 8ull << 30);
    QVERIFY(!poor.ram_ok);
    QVERIFY(poor.summary().contains(QStringLiteral("NOT enough")));
    QVERIFY(mid.ram_ok);
  }
};

QTEST_GUILESS_MAIN(TestDownloadCatalog)
#include "test_download_catalog.moc"
