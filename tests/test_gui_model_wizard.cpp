// The model wizard driven offscreen with QTest: a valid local GGUF is accepted
// and registered; a malformed file is refused with the GGUF reader's reason on
// screen; a catalog entry pointing at the local test server shows its size,
// checksum status and fit, then downloads, verifies and registers.
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
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
#include "app/qt/file_hasher.h"
#include "support/http_test_server.h"
#include "support/synthetic_gguf.h"
#include "synth/synthetic_model.h"
#include "ui/model_wizard.h"
#include "ui/model_wizard_pages.h"
#include "ui/theme.h"

using namespace moe;
using moe::test::HttpTestServer;

namespace {

QByteArray syntheticGguf() { return test::syntheticGgufBytes("qwen3moe"); }

void writeFile(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly));
  QCOMPARE(f.write(bytes), bytes.size());
}

// A 24 GB budget on a GPU of that size: the plan every view resolves (app/core/load_plan.h).
const PlanRequest kRequest{BudgetSetting::vramBytes(24'000'000'000ull), OffloadPolicy::kProactive, 4096,
                           false};
const DeviceMemory kGpu{true, 24'000'000'000ull, 24'000'000'000ull, {}};

}  // namespace

class TestGuiModelWizard : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QByteArray body_ = syntheticGguf();
  int n_ = 0;

  struct Env {
    AppDatabase db;
    DownloadStore store;
    ModelRegistry registry;
    DownloadManager dm;
    explicit Env(const QString& path)
        : db(AppDatabase::open(path.toStdString())),
          store(db),
          registry(db),
          dm(store, &registry, timings()) {}
    static DownloadTimings timings() {
      DownloadTimings t;
      t.backoff_first_ms = 20;
      t.progress_ms = 20;
      return t;
    }
  };

  std::unique_ptr<Env> env() {
    return std::make_unique<Env>(dir_.path() + QStringLiteral("/w%1.db").arg(++n_));
  }

  static void clickNext(QWizard& w) { QTest::mouseClick(w.button(QWizard::NextButton), Qt::LeftButton); }

 private slots:
  void localValidGgufIsAccepted() {
    auto e = env();
    const QString path = dir_.path() + "/local-ok.gguf";
    writeFile(path, body_);
    ModelWizard w(e->dm, e->registry, ModelCatalog::builtIn(), kRequest, kGpu, dir_.path() + "/models");
    QSignalSpy installed(&w, &ModelWizard::modelInstalled);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));

    auto* local = w.findChild<QLineEdit*>("localEdit");
    QVERIFY(local);
    QTest::keyClicks(local, path);  // typing there selects "a GGUF file on this computer"
    QVERIFY(w.findChild<QRadioButton*>("localRadio")->isChecked());
    QVERIFY(w.button(QWizard::NextButton)->isEnabled());
    clickNext(w);
    QCOMPARE(w.currentId(), int(ModelWizard::DonePage));
    QCOMPARE(installed.count(), 1);
    QCOMPARE(installed.at(0).at(0).toString(), path);
    QVERIFY(w.findChild<QLabel*>("donePath")->text().contains(path));
    const auto rec = e->registry.findByPath(path.toStdString());
    QVERIFY(rec);
    QCOMPARE(rec->arch, std::string("qwen3moe"));
    QCOMPARE(rec->size_bytes, qint64(body_.size()));
    // The SHA-256 arrives from the worker thread a moment later.
    QTRY_COMPARE_WITH_TIMEOUT(QString::fromStdString(e->registry.findByPath(path.toStdString())->sha256),
                              sha256Hex(body_), 10000);
  }

  void malformedFileIsRejectedWithTheReason() {
    auto e = env();
    const QString path = dir_.path() + "/truncated.gguf";
    writeFile(path, body_.left(body_.size() / 3));  // a download cut short
    const QString reason = inspectGguf(path).error;
    QVERIFY(!reason.isEmpty());

    ModelWizard w(e->dm, e->registry, ModelCatalog::builtIn(), kRequest, kGpu, dir_.path() + "/models");
    QSignalSpy installed(&w, &ModelWizard::modelInstalled);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTest::keyClicks(w.findChild<QLineEdit*>("localEdit"), path);
    clickNext(w);
    QCOMPARE(w.currentId(), int(ModelWizard::ChoosePage));
    auto* error = w.findChild<QLabel*>("localErrorLabel");
    QVERIFY(error);
    QVERIFY(error->isVisible());
    QCOMPARE(error->text(), QStringLiteral("Not a usable model: ") + reason);
    QCOMPARE(installed.count(), 0);
    QVERIFY(e->registry.list().empty());

    // Not a GGUF at all: the reader says so too.
    const QString junk = dir_.path() + "/notes.gguf";
    writeFile(junk, "these are my notes, not a model");
    QLineEdit* local = w.findChild<QLineEdit*>("localEdit");
    local->clear();
    QTest::keyClicks(local, junk);
    clickNext(w);
    QCOMPARE(w.currentId(), int(ModelWizard::ChoosePage));
    QCOMPARE(error->text(), QStringLiteral("Not a usable model: ") + inspectGguf(junk).error);
    QVERIFY(e->registry.list().empty());
  }

  void catalogEntryDownloadsAndRegisters() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    server.setPacing(8192, 2);
    auto e = env();
    ModelCatalog catalog = ModelCatalog::builtIn();
    CatalogEntry local;
    local.id = "test-local";
    local.name = "Local test model";
    local.family = "qwen3moe";
    local.quant = "Q8_0";
    local.shape = "Q3-30B";
    local.url = server.url("/tiny-qwen3moe.gguf").toString();
    local.sha256 = sha256Hex(body_);
    local.size_bytes = body_.size();
    local.licence = "test";
    catalog.add(local);

    ModelWizard w(e->dm, e->registry, catalog, kRequest, kGpu, dir_.path() + "/models");
    QSignalSpy installed(&w, &ModelWizard::modelInstalled);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* list = w.findChild<QTreeWidget*>("catalogList");
    QVERIFY(list);
    QCOMPARE(list->topLevelItemCount(), catalog.entries().size());
    QTreeWidgetItem* item = nullptr;
    for (int i = 0; i < list->topLevelItemCount(); ++i) {
      QTreeWidgetItem* it = list->topLevelItem(i);
      const CatalogEntry* ce = catalog.find(it->data(0, Qt::UserRole).toString());
      QVERIFY(ce);
      // Each row: licence, what is checked, and whether it fits this budget, before any download.
      const CatalogFit fit = estimateCatalogFit(*ce, kRequest, kGpu);
      QCOMPARE(it->text(3), ce->licence);
      QCOMPARE(it->text(4), fit.shortSummary());
      QCOMPARE(it->text(5), ce->checksumShort());
      QCOMPARE(it->toolTip(5), ce->checksumNote());
      if (ce->id == "test-local") item = it;
    }
    QVERIFY(item);
    QVERIFY(!w.button(QWizard::NextButton)->isEnabled());  // nothing chosen yet
    QCOMPARE(server.requestCount(), 0);                    // nothing downloaded to show the list

    list->scrollToItem(item);
    const QRect rect = list->visualItemRect(item);
    QVERIFY2(list->viewport()->rect().contains(rect.center()), "the row is not on screen");
    QTest::mouseClick(list->viewport(), Qt::LeftButton, {}, rect.center());
    QVERIFY(item->isSelected());
    // The details under the list say it in full.
    const QString details = w.findChild<QLabel*>("catalogDetails")->text();
    QVERIFY2(details.contains(QStringLiteral("After download: SHA-256 checked")), qPrintable(details));
    QVERIFY(details.contains(QStringLiteral("Fit: GPU ")));
    QVERIFY(details.contains(QStringLiteral("%1 bytes (published)").arg(body_.size())));
    QVERIFY(w.button(QWizard::NextButton)->isEnabled());
    clickNext(w);
    QCOMPARE(w.currentId(), int(ModelWizard::DownloadPage));
    QVERIFY(!w.button(QWizard::NextButton)->isEnabled());  // until the file is checked

    const QString dest = dir_.path() + "/models/tiny-qwen3moe.gguf";
    QTRY_VERIFY_WITH_TIMEOUT(installed.count() == 1, 20000);
    QCOMPARE(installed.at(0).at(0).toString(), dest);
    auto* bar = w.findChild<QProgressBar*>("progressBar");
    QCOMPARE(bar->value(), bar->maximum());
    QCOMPARE(w.currentPage()->title(), QStringLiteral("Downloaded"));  // not "Downloading" any more
    QVERIFY(w.button(QWizard::NextButton)->isEnabled());
    clickNext(w);
    QCOMPARE(w.currentId(), int(ModelWizard::DonePage));

    const auto rec = e->registry.findByPath(dest.toStdString());
    QVERIFY(rec);
    QCOMPARE(QString::fromStdString(rec->sha256), sha256Hex(body_));
    QCOMPARE(e->store.get(w.downloadId())->catalog_id, std::string("test-local"));
    QCOMPARE(hashFile(dest).sha256, sha256Hex(body_));
  }

  // An entry without a published checksum says so plainly before anything is downloaded.
  void missingChecksumIsSaidPlainly() {
    auto e = env();
    ModelCatalog catalog = ModelCatalog::builtIn();
    CatalogEntry x;
    x.id = "no-sha";
    x.name = "No checksum";
    x.family = "olmoe";
    x.quant = "Q8_0";
    x.shape = "OLMoE";
    x.url = "https://example.org/no-sha.gguf";
    x.size_bytes = 123456;
    x.licence = "test";
    catalog.add(x);
    ModelWizard w(e->dm, e->registry, catalog, kRequest, kGpu, dir_.path() + "/models4");
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* list = w.findChild<QTreeWidget*>("catalogList");
    QTreeWidgetItem* item = list->topLevelItem(list->topLevelItemCount() - 1);
    QCOMPARE(item->text(0), QStringLiteral("No checksum"));
    QCOMPARE(item->text(5), QStringLiteral("size only"));
    QTest::mouseClick(list->viewport(), Qt::LeftButton, {}, list->visualItemRect(item).center());
    QVERIFY(w.findChild<QLabel*>("catalogDetails")
                ->text()
                .contains(QStringLiteral("no published checksum: size checked only")));
  }

  void pauseButtonPausesAndResumes() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    server.setPacing(2048, 10);
    auto e = env();
    ModelWizard w(e->dm, e->registry, ModelCatalog::builtIn(), kRequest, kGpu, dir_.path() + "/models2");
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTest::keyClicks(w.findChild<QLineEdit*>("urlEdit"), server.url("/pasted.gguf").toString());
    QVERIFY(w.findChild<QRadioButton*>("urlRadio")->isChecked());
    clickNext(w);
    QCOMPARE(w.currentId(), int(ModelWizard::DownloadPage));
    const qint64 id = w.downloadId();
    QTRY_VERIFY_WITH_TIMEOUT(e->dm.status(id).bytes_done > 0, 20000);
    auto* pause = w.findChild<QPushButton*>("pauseButton");
    QTest::mouseClick(pause, Qt::LeftButton);
    QCOMPARE(e->dm.status(id).state, QStringLiteral("paused"));
    QCOMPARE(pause->text(), QStringLiteral("Resume"));
    QTest::mouseClick(pause, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(e->dm.status(id).state, QStringLiteral("done"), 20000);
    QVERIFY(w.findChild<QLabel*>("speedLabel")->text().endsWith("/s"));
  }

  void badUrlIsRefused() {
    auto e = env();
    ModelWizard w(e->dm, e->registry, ModelCatalog::builtIn(), kRequest, kGpu, dir_.path() + "/models3");
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTest::keyClicks(w.findChild<QLineEdit*>("urlEdit"), "https://example.org/readme.txt");
    clickNext(w);
    QCOMPARE(w.currentId(), int(ModelWizard::ChoosePage));
    QVERIFY(w.findChild<QLabel*>("urlErrorLabel")->text().contains(".gguf"));
    QVERIFY(e->store.all().empty());
  }

  // Showing an error moves nothing on the page, and it shows under the fields it is about.
  void errorsShowUnderTheirFieldsAndMoveNothing() {
    auto e = env();
    ModelWizard w(e->dm, e->registry, ModelCatalog::builtIn(), kRequest, kGpu, dir_.path() + "/models5");
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* url = w.findChild<QLineEdit*>("urlEdit");
    auto* sha = w.findChild<QLineEdit*>("shaEdit");
    auto* local = w.findChild<QLineEdit*>("localEdit");
    auto* local_radio = w.findChild<QRadioButton*>("localRadio");
    auto y = [&w](QWidget* x) { return x->mapTo(&w, QPoint(0, 0)).y(); };
    const int url_y = y(url), local_y = y(local);

    QTest::keyClicks(url, "https://example.org/model.gguf");
    QTest::keyClicks(sha, "not-a-checksum");
    clickNext(w);
    QCOMPARE(w.currentId(), int(ModelWizard::ChoosePage));
    QLabel* shown = nullptr;
    for (QLabel* l : w.currentPage()->findChildren<QLabel*>())
      if (l->isVisible() && l->objectName().endsWith("rrorLabel") && l->text().contains("SHA-256")) shown = l;
    QVERIFY2(shown, "no visible error names the SHA-256");
    QVERIFY2(
        y(shown) > y(sha) && y(shown) < y(local_radio),
        qPrintable(QString("the SHA-256 error is at y=%1, not between the SHA-256 field (%2) and the local "
                           "file section (%3)")
                       .arg(y(shown))
                       .arg(y(sha))
                       .arg(y(local_radio))));
    QCOMPARE(y(url), url_y);
    QCOMPARE(y(local), local_y);
    QVERIFY(e->store.all().empty());

    // A folder is called a folder, under the local file field.
    QTest::keyClicks(local, dir_.path());
    QVERIFY(local_radio->isChecked());
    clickNext(w);
    QCOMPARE(w.currentId(), int(ModelWizard::ChoosePage));
    auto* local_error = w.findChild<QLabel*>("localErrorLabel");
    QVERIFY(local_error && local_error->isVisible());
    QVERIFY2(local_error->text().contains("is a folder"), qPrintable(local_error->text()));
    QVERIFY(y(local_error) > y(local));
    QCOMPARE(y(url), url_y);
    QCOMPARE(y(local), local_y);
  }

  // A download that fails its checksum: the page says so in its title, and the bar
  // is no longer a full blue bar (the corrupt file is removed: nothing is kept).
  void failedDownloadLooksFailed() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    auto e = env();
    ModelCatalog catalog = ModelCatalog::builtIn();
    CatalogEntry bad;
    bad.id = "bad-sha";
    bad.name = "Wrong checksum";
    bad.family = "qwen3moe";
    bad.quant = "Q8_0";
    bad.shape = "Q3-30B";
    bad.url = server.url("/bad-sha.gguf").toString();
    bad.sha256 = QString(64, QChar('0'));
    bad.size_bytes = body_.size();
    bad.licence = "test";
    catalog.add(bad);
    ModelWizard w(e->dm, e->registry, catalog, kRequest, kGpu, dir_.path() + "/models6");
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    auto* list = w.findChild<QTreeWidget*>("catalogList");
    QTreeWidgetItem* item = list->topLevelItem(list->topLevelItemCount() - 1);
    QCOMPARE(item->text(0), QStringLiteral("Wrong checksum"));
    list->scrollToItem(item);
    QTest::mouseClick(list->viewport(), Qt::LeftButton, {}, list->visualItemRect(item).center());
    clickNext(w);
    QCOMPARE(w.currentId(), int(ModelWizard::DownloadPage));
    QTRY_COMPARE_WITH_TIMEOUT(e->dm.status(w.downloadId()).state, QStringLiteral("failed"), 20000);
    QCOMPARE(w.currentPage()->title(), QStringLiteral("Download failed"));
    QCOMPARE(w.findChild<QLabel*>("stateLabel")->text(), QStringLiteral("Failed"));
    auto* bar = w.findChild<QProgressBar*>("progressBar");
    QVERIFY2(bar->value() < bar->maximum(), qPrintable(bar->text()));
    QVERIFY(bar->text().startsWith("Failed"));
    QCOMPARE(bar->palette().color(QPalette::Highlight), errorColor(w.palette()));
    QCOMPARE(w.findChild<QPushButton*>("pauseButton")->text(), QStringLiteral("Retry"));
  }

  void speedAndEtaTexts() {
    QCOMPARE(speedText(0, true), QStringLiteral("0 B/s (stalled)"));
    QCOMPARE(speedText(2'500'000, true), QStringLiteral("2.5 MB/s"));
    QCOMPARE(etaText(-1), QStringLiteral("ETA unknown"));
    QCOMPARE(etaText(62), QStringLiteral("ETA 1:02"));
    QCOMPARE(etaText(3723), QStringLiteral("ETA 1:02:03"));
  }
};

QTEST_MAIN(TestGuiModelWizard)
#include "test_gui_model_wizard.moc"
