// The downloads view against real downloads from local HTTP servers and a real
// database: a download whose bytes fail the checksum shows Failed with the reason,
// one running shows its progress, one behind it shows Waiting; Cancel removes the
// waiting one (row, queue and database); Pause and Resume drive the running one;
// Retry fetches the failed one again, and it ends Downloaded.
#include <QAbstractItemModelTester>
#include <QLabel>
#include <QPushButton>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "app/core/app_database.h"
#include "app/core/download_store.h"
#include "app/core/model_registry.h"
#include "app/qt/download_manager.h"
#include "app/qt/download_verify.h"
#include "support/http_test_server.h"
#include "support/synthetic_gguf.h"
#include "ui/download_list_model.h"
#include "ui/downloads_view.h"

using namespace moe;
using moe::test::HttpTestServer;

namespace {

QString cell(DownloadsView& v, qint64 id, int column) {
  DownloadListModel* m = v.model();
  const int row = m->rowOf(id);
  return row < 0 ? QString("<no row>") : m->index(row, column).data().toString();
}

void select(DownloadsView& v, qint64 id) {
  QTableView* t = v.table();
  const int row = v.model()->rowOf(id);
  QVERIFY(row >= 0);
  const QRect r = t->visualRect(v.model()->index(row, DownloadListModel::ColFile));
  QTest::mouseClick(t->viewport(), Qt::LeftButton, {}, r.center());
  QCOMPARE(t->selectionModel()->selectedRows().size(), 1);
}

}  // namespace

class GuiDownloadsViewTest : public QObject {
  Q_OBJECT

 private slots:
  void queuedRunningFailedWithRetryAndCancel() {
    QTemporaryDir dir;
    const QByteArray body = test::syntheticGgufBytes("olmoe");
    HttpTestServer flaky(body), slow(body);
    QVERIFY(flaky.start() && slow.start());
    flaky.setMode(HttpTestServer::Mode::WrongContent);  // the first answer's bytes are wrong; then right
    slow.setPacing(512, 20);                            // slow enough to be paused mid-way on a busy machine

    AppDatabase db = AppDatabase::open(dir.filePath("d.db").toStdString());
    DownloadStore store(db);
    ModelRegistry registry(db);
    DownloadTimings t;
    t.backoff_first_ms = 20;
    t.progress_ms = 20;
    DownloadManager dm(store, &registry, t);
    DownloadsView view(dm);
    QAbstractItemModelTester tester(view.model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
    view.show();
    QVERIFY(QTest::qWaitForWindowExposed(&view));
    QVERIFY(view.findChild<QLabel*>("noDownloads")->isVisible());

    const QString sha = sha256Hex(body);
    const qint64 failing = dm.enqueue(flaky.url("/a.gguf"), dir.filePath("a.gguf"), sha, body.size());
    const qint64 running = dm.enqueue(slow.url("/b.gguf"), dir.filePath("b.gguf"), sha, body.size());
    const qint64 waiting = dm.enqueue(slow.url("/c.gguf"), dir.filePath("c.gguf"), sha, body.size());
    QCOMPARE(view.model()->rowCount(), 3);
    QVERIFY(!view.findChild<QLabel*>("noDownloads")->isVisible());

    QTRY_COMPARE_WITH_TIMEOUT(cell(view, failing, DownloadListModel::ColState), QString("Failed"), 20000);
    QVERIFY2(cell(view, failing, DownloadListModel::ColError).contains("checksum mismatch"),
             qPrintable(cell(view, failing, DownloadListModel::ColError)));
    QTRY_VERIFY_WITH_TIMEOUT(dm.status(running).bytes_done > 0, 20000);
    QCOMPARE(cell(view, running, DownloadListModel::ColState), QString("Downloading"));
    QVERIFY2(cell(view, running, DownloadListModel::ColProgress).contains(" of "),
             qPrintable(cell(view, running, DownloadListModel::ColProgress)));
    // "12.3 KB/s", or "0 B/s (stalled)" before the first speed sample.
    QVERIFY2(cell(view, running, DownloadListModel::ColSpeed).contains("B/s"),
             qPrintable(cell(view, running, DownloadListModel::ColSpeed)));
    QCOMPARE(cell(view, waiting, DownloadListModel::ColState), QString("Waiting"));
    QCOMPARE(cell(view, waiting, DownloadListModel::ColFile), QString("c.gguf"));

    auto* pause = view.findChild<QPushButton*>("pauseDownload");
    auto* retry = view.findChild<QPushButton*>("retryDownload");
    auto* cancel = view.findChild<QPushButton*>("cancelDownload");

    // Cancel the waiting one: gone from the view, the queue and the database.
    select(view, waiting);
    QVERIFY(cancel->isEnabled() && !retry->isEnabled());
    QTest::mouseClick(cancel, Qt::LeftButton);
    QCOMPARE(view.model()->rowCount(), 2);
    QCOMPARE(view.model()->rowOf(waiting), -1);
    QCOMPARE(dm.status(waiting).id, 0);
    QVERIFY(!store.get(waiting));

    // Pause and resume the running one from the view.
    select(view, running);
    QCOMPARE(pause->text(), QString("Pause"));
    QTest::mouseClick(pause, Qt::LeftButton);
    QCOMPARE(dm.status(running).state, QString("paused"));
    QCOMPARE(cell(view, running, DownloadListModel::ColState), QString("Paused"));
    QCOMPARE(pause->text(), QString("Resume"));
    QTest::mouseClick(pause, Qt::LeftButton);
    QVERIFY(dm.status(running).state == "queued" || dm.status(running).state == "running");
    slow.setPacing(64 * 1024, 0);  // the slow link has been seen: the rest at full speed

    // Retry the failed one: the server now sends the right bytes. Selected, its reason
    // shows in full below the table (the cell may elide it).
    select(view, failing);
    auto* reason = view.findChild<QLabel*>("failureReason");
    QVERIFY(reason && reason->isVisible());
    QVERIFY2(reason->text().startsWith("Why it failed: ") && reason->text().contains("checksum mismatch"),
             qPrintable(reason->text()));
    QVERIFY(retry->isEnabled());
    QVERIFY(!pause->isEnabled());
    QTest::mouseClick(retry, Qt::LeftButton);
    QTRY_COMPARE_WITH_TIMEOUT(cell(view, failing, DownloadListModel::ColState), QString("Downloaded"), 30000);
    QTRY_COMPARE_WITH_TIMEOUT(cell(view, running, DownloadListModel::ColState), QString("Downloaded"), 30000);
    QVERIFY(cell(view, failing, DownloadListModel::ColError).isEmpty());
    QVERIFY(QFile::exists(dir.filePath("a.gguf")) && QFile::exists(dir.filePath("b.gguf")));
    QVERIFY(!QFile::exists(dir.filePath("c.gguf")) && !QFile::exists(dir.filePath("c.gguf.part")));
    QVERIFY(registry.findByPath(dir.filePath("a.gguf").toStdString()));
  }
};

QTEST_MAIN(GuiDownloadsViewTest)
#include "test_gui_downloads_view.moc"
