// Searching the Hugging Face hub from the model wizard, against a local server
// that serves hub responses in the API's format (tests/data/hub): the search asks
// for GGUF repositories, lists only the supported MoE ones (a dense model is left
// out and counted); opening a repository lists its .gguf files with quant, size,
// checksum and the fit at the budget (a quant the engine does not compute and a
// split model are shown but cannot be chosen); the chosen file downloads through
// the usual manager, its SHA-256 from the hub checked, and is registered. A hub
// that cannot be reached is said so. The parsers on their own, too.
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QtTest>

#include "app/core/app_database.h"
#include "app/core/download_store.h"
#include "app/core/model_registry.h"
#include "app/qt/download_manager.h"
#include "app/qt/download_verify.h"
#include "app/qt/hub_search.h"
#include "support/recorded_http_server.h"
#include "support/synthetic_gguf.h"
#include "ui/model_wizard.h"
#include "ui/model_wizard_hub_page.h"

using namespace moe;

namespace {
// A 24 GB budget on a GPU of that size: the plan every view resolves (app/core/load_plan.h).
const PlanRequest kRequest{BudgetSetting::vramBytes(24'000'000'000ull), OffloadPolicy::kProactive, 4096,
                           false};
const DeviceMemory kGpu{true, 24'000'000'000ull, 24'000'000'000ull, {}};
}  // namespace
using moe::test::RecordedHttpServer;

namespace {

QByteArray fixture(const QString& name) {
  QFile f(QStringLiteral(MOECHAT_TEST_DATA "/hub/") + name);
  if (!f.open(QIODevice::ReadOnly)) qFatal("missing fixture %s", qPrintable(name));
  return f.readAll();
}

const QString kRepo = QStringLiteral("moechat-test/Qwen3-30B-A3B-GGUF");

QTreeWidgetItem* child(QTreeWidgetItem* parent, const QString& path) {
  for (int i = 0; i < parent->childCount(); ++i)
    if (parent->child(i)->text(HubSearchPage::ColName) == path) return parent->child(i);
  return nullptr;
}

}  // namespace

class GuiHubSearchTest : public QObject {
  Q_OBJECT

 private slots:
  void parsersReadTheHubsFormat() {
    QCOMPARE(quantFromFileName("Qwen3-30B-A3B-Q4_K_M.gguf"), QString("Q4_K_M"));
    QCOMPARE(quantFromFileName("olmoe-1b-7b-0924-instruct-q8_0.gguf"), QString("Q8_0"));
    QCOMPARE(quantFromFileName("Qwen3-30B-A3B-IQ4_XS.gguf"), QString("IQ4_XS"));
    QCOMPARE(quantFromFileName("mixtral-8x7b.BF16-00001-of-00002.gguf"), QString("BF16"));
    QCOMPARE(quantFromFileName("model.gguf"), QString());
    QVERIFY(engineRunsQuant("Q4_K_M") && engineRunsQuant("q8_0") && engineRunsQuant("IQ4_XS"));
    QVERIFY(engineRunsQuant("UD-Q4_K_XL") && engineRunsQuant("UD-IQ2_XXS") && engineRunsQuant("IQ3_M"));
    QVERIFY(!engineRunsQuant("TQ1_0") && !engineRunsQuant("IQ4_KS"));
    QCOMPARE(quantFromFileName("Qwen3-30B-A3B-TQ1_0.gguf"), QString("TQ1_0"));
    QString family, shape;
    recogniseShape("unsloth/Qwen3-30B-A3B-Instruct-2507-GGUF", &family, &shape);
    QCOMPARE(family + "/" + shape, QString("qwen3moe/Q3-30B"));
    recogniseShape("bartowski/Qwen_Qwen3.6-35B-A3B-GGUF", &family, &shape);
    QCOMPARE(family + "/" + shape, QString("qwen35moe/Q3.6-35B"));
    recogniseShape("unsloth/Qwen3.5-122B-A10B-GGUF", &family, &shape);
    QCOMPARE(family + "/" + shape, QString("qwen35moe/Q3.5-122B"));
    recogniseShape("Qwen/Qwen3.5-397B-A17B", &family, &shape);
    QCOMPARE(family + "/" + shape, QString("qwen35moe/"));
    recogniseShape("TheBloke/Mixtral-8x7B-Instruct-v0.1-GGUF", &family, &shape);
    QCOMPARE(family + "/" + shape, QString("llama/Mixt"));
    recogniseShape("allenai/OLMoE-1B-7B-0924-Instruct-GGUF", &family, &shape);
    QCOMPARE(family + "/" + shape, QString("olmoe/OLMoE"));
    recogniseShape("someone/Mixtral-8x22B-GGUF", &family, &shape);
    QCOMPARE(family + "/" + shape, QString("llama/"));  // the family, no size preset
    recogniseShape("unsloth/Qwen3-8B-GGUF", &family, &shape);
    QVERIFY(family.isEmpty());  // dense

    const QList<HubRepo> repos = parseHubSearch(fixture("search-qwen3-moe.json"));
    QCOMPARE(repos.size(), 4);
    QCOMPARE(repos.back().id, QString("unsloth/Qwen3-8B-GGUF"));  // unsupported last
    QCOMPARE(repos.front().downloads, qint64(98213));

    QByteArray tree = fixture("tree-moechat-test.json");
    tree.replace("@SHA256@", QByteArray(64, 'a')).replace("@SIZE@", "1234");
    const QList<HubFile> files = parseHubTree(kRepo, tree);
    QCOMPARE(files.size(), 4);  // not .gitattributes, README, the folder, nor the second split part
    QCOMPARE(files[0].path, QString("Qwen3-30B-A3B-Q8_0.gguf"));
    QCOMPARE(files[0].size_bytes, qint64(1234));
    QCOMPARE(files[0].sha256, QString(64, 'a'));
    QCOMPARE(files[1].size_bytes, qint64(18556686208));
    QCOMPARE(files[3].split_parts, 4);
    QVERIFY_THROWS_EXCEPTION(CatalogError, parseHubTree(kRepo, "{\"error\": \"Repository not found\"}"));
    QVERIFY_THROWS_EXCEPTION(CatalogError, parseHubSearch("<html>"));
  }

  void searchListChooseAndDownload() {
    const QByteArray body = test::syntheticGgufBytes("qwen3moe");
    QByteArray tree = fixture("tree-moechat-test.json");
    tree.replace("@SHA256@", sha256Hex(body).toLatin1()).replace("@SIZE@", QByteArray::number(body.size()));
    RecordedHttpServer hub;
    QVERIFY(hub.start());
    hub.route("/api/models", {200, "application/json; charset=utf-8", fixture("search-qwen3-moe.json")});
    hub.route("/api/models/" + kRepo + "/tree/main", {200, "application/json; charset=utf-8", tree});
    hub.route("/" + kRepo + "/resolve/main/Qwen3-30B-A3B-Q8_0.gguf", {200, "application/octet-stream", body});

    QTemporaryDir dir;
    AppDatabase db = AppDatabase::open(dir.filePath("h.db").toStdString());
    DownloadStore store(db);
    ModelRegistry registry(db);
    DownloadManager dm(store, &registry);
    ModelWizard w(dm, registry, ModelCatalog::builtIn(), kRequest, kGpu, dir.filePath("models"));
    w.setHubBase(hub.base());
    QSignalSpy installed(&w, &ModelWizard::modelInstalled);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));

    auto* radio = w.findChild<QRadioButton*>("hubRadio");
    QTest::mouseClick(radio, Qt::LeftButton, {}, QPoint(8, radio->height() / 2));
    QVERIFY(radio->isChecked());
    QTest::mouseClick(w.button(QWizard::NextButton), Qt::LeftButton);
    QCOMPARE(w.currentId(), int(ModelWizard::HubPage));
    QVERIFY(!w.button(QWizard::NextButton)->isEnabled());

    auto* query = w.findChild<QLineEdit*>("hubQuery");
    QTest::keyClicks(query, "qwen3 moe");
    QTest::keyClick(query, Qt::Key_Return);
    auto* results = w.findChild<QTreeWidget*>("hubResults");
    QTRY_COMPARE_WITH_TIMEOUT(results->topLevelItemCount(), 3, 10000);
    const QString asked = hub.requests().value(0);
    QVERIFY2(
        asked.startsWith("/api/models?") && asked.contains("filter=gguf") && asked.contains("search=qwen3"),
        qPrintable(asked));
    QVERIFY(w.findChild<QLabel*>("hubStatus")->text().contains("1 other"));  // the dense Qwen3-8B
    for (int i = 0; i < results->topLevelItemCount(); ++i)
      QVERIFY(results->topLevelItem(i)->text(0) != "unsloth/Qwen3-8B-GGUF");

    QTreeWidgetItem* repo = nullptr;
    for (int i = 0; i < results->topLevelItemCount(); ++i)
      if (results->topLevelItem(i)->text(0) == kRepo) repo = results->topLevelItem(i);
    QVERIFY(repo);
    results->scrollToItem(repo);
    QTest::mouseClick(results->viewport(), Qt::LeftButton, {}, results->visualItemRect(repo).center());
    QTRY_COMPARE_WITH_TIMEOUT(repo->childCount(), 4, 10000);
    QVERIFY(hub.requests().contains("/api/models/" + kRepo + "/tree/main?recursive=true"));

    HubRepo r;
    r.id = kRepo;
    recogniseShape(kRepo, &r.family, &r.shape);
    QTreeWidgetItem* q8 = child(repo, "Qwen3-30B-A3B-Q8_0.gguf");
    QTreeWidgetItem* q4 = child(repo, "Qwen3-30B-A3B-Q4_K_M.gguf");
    QTreeWidgetItem* unsupported = child(repo, "Qwen3-30B-A3B-TQ1_0.gguf");
    QTreeWidgetItem* split = child(repo, "split/Qwen3-30B-A3B-BF16-00001-of-00004.gguf");
    QVERIFY(q8 && q4 && unsupported && split);
    QCOMPARE(q4->text(HubSearchPage::ColQuant), QString("Q4_K_M"));
    QCOMPARE(q4->text(HubSearchPage::ColSize), humanBytes(18556686208ull));
    QCOMPARE(q4->text(HubSearchPage::ColChecksum), QString("SHA-256"));
    HubFile q4file;
    q4file.repo = kRepo;
    q4file.path = "Qwen3-30B-A3B-Q4_K_M.gguf";
    q4file.quant = "Q4_K_M";
    q4file.size_bytes = 18556686208;
    QCOMPARE(q4->text(HubSearchPage::ColFit),
             estimateCatalogFit(q4file.toCatalogEntry(hub.base(), r), kRequest, kGpu).shortSummary());
    QVERIFY(q4->text(HubSearchPage::ColFit).startsWith("yes"));
    QVERIFY(unsupported->text(HubSearchPage::ColFit).contains("not computed by this engine"));
    QVERIFY(!(unsupported->flags() & Qt::ItemIsSelectable));
    QVERIFY(split->text(HubSearchPage::ColFit).contains("split in 4 files"));
    QVERIFY(!(split->flags() & Qt::ItemIsSelectable));

    results->scrollToItem(q8);
    QTest::mouseClick(results->viewport(), Qt::LeftButton, {}, results->visualItemRect(q8).center());
    QVERIFY(q8->isSelected());
    QVERIFY(w.findChild<QLabel*>("hubDetails")->text().contains("SHA-256 checked"));
    QVERIFY(w.button(QWizard::NextButton)->isEnabled());
    QTest::mouseClick(w.button(QWizard::NextButton), Qt::LeftButton);
    QCOMPARE(w.currentId(), int(ModelWizard::DownloadPage));
    QTRY_VERIFY_WITH_TIMEOUT(installed.count() == 1, 20000);
    const QString dest = dir.filePath("models/Qwen3-30B-A3B-Q8_0.gguf");
    QCOMPARE(installed.at(0).at(0).toString(), dest);
    const auto rec = registry.findByPath(dest.toStdString());
    QVERIFY(rec);
    QCOMPARE(QString::fromStdString(rec->sha256), sha256Hex(body));
    QCOMPARE(rec->arch, std::string("qwen3moe"));
    QCOMPARE(QString::fromStdString(store.get(w.downloadId())->catalog_id),
             "hub:" + kRepo + "/Qwen3-30B-A3B-Q8_0.gguf");
  }

  void anUnreachableHubIsSaidSo() {
    RecordedHttpServer closed;
    QVERIFY(closed.start());
    const QUrl base = closed.base();
    QTemporaryDir dir;
    AppDatabase db = AppDatabase::open(dir.filePath("h2.db").toStdString());
    DownloadStore store(db);
    ModelRegistry registry(db);
    DownloadManager dm(store, &registry);
    ModelWizard w(dm, registry, ModelCatalog::builtIn(), kRequest, kGpu, dir.filePath("models"));
    w.setHubBase(base);  // no route for the search: the server answers 404
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    w.findChild<QRadioButton*>("hubRadio")->setChecked(true);
    QTest::mouseClick(w.button(QWizard::NextButton), Qt::LeftButton);
    auto* query = w.findChild<QLineEdit*>("hubQuery");
    QTest::keyClicks(query, "mixtral");
    QTest::keyClick(query, Qt::Key_Return);
    auto* status = w.findChild<QLabel*>("hubStatus");
    QTRY_VERIFY_WITH_TIMEOUT(status->text().startsWith("The Hugging Face search failed"), 10000);
    QVERIFY(w.findChild<QPushButton*>("hubSearchButton")->isEnabled());  // the user can try again
    QCOMPARE(w.findChild<QTreeWidget*>("hubResults")->topLevelItemCount(), 0);
  }
};

QTEST_MAIN(GuiHubSearchTest)
#include "test_gui_hub_search.moc"
