// Stall: a server that stops sending but keeps the socket open. The manager
// reports 0 B/s once nothing has arrived for idle_ms, aborts after stall_ms,
// retries with Range from the .part's size and finishes; a link that never
// delivers a byte fails after max_attempts with backoff delays that double.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "app/core/app_database.h"
#include "app/core/download_store.h"
#include "app/qt/download_manager.h"
#include "app/qt/file_hasher.h"
#include "support/http_test_server.h"
#include "support/synthetic_gguf.h"
#include "synth/synthetic_model.h"

using namespace moe;
using moe::test::HttpTestServer;

namespace {

QByteArray syntheticGguf() { return test::syntheticGgufBytes("deepseek"); }

}  // namespace

class TestDownloadStall : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QByteArray body_ = syntheticGguf();

 private slots:
  void stallIsRetriedAndSpeedShowsZero() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    const qint64 half = body_.size() / 2;
    server.setMode(HttpTestServer::Mode::Stall, half, /*first_only=*/true);
    server.setPacing(8192, 2);  // a measurable speed before the stall

    // The link's idle time on a clock the test moves: while bytes flow it stands
    // still, so no pause of a busy machine counts as a stall; once the server holds
    // at `half`, the test moves it past idle_ms, then past stall_ms.
    qint64 idle_clock = 0;
    DownloadTimings t;
    t.stall_ms = 1500;
    t.idle_ms = 150;
    t.progress_ms = 10;
    t.speed_window_ms = 300;
    t.backoff_first_ms = 20;
    t.idle_clock_ms = [&idle_clock] { return idle_clock; };
    AppDatabase db = AppDatabase::open((dir_.path() + "/stall.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, t);
    QSignalSpy progress(&dm, &DownloadManager::progress);
    QSignalSpy retrying(&dm, &DownloadManager::retrying);
    QSignalSpy finished(&dm, &DownloadManager::finished);
    const QString dest = dir_.path() + "/stall.gguf";
    const qint64 id = dm.enqueue(server.url(), dest, sha256Hex(body_), body_.size());

    // Half the bytes in, the socket open, nothing more arriving: not yet idle.
    QTRY_VERIFY_WITH_TIMEOUT(dm.status(id).bytes_done == half, 20000);
    QVERIFY(!dm.status(id).stalled);
    idle_clock += t.idle_ms;
    const qsizetype before_idle = progress.count();
    QTRY_VERIFY_WITH_TIMEOUT(progress.count() > before_idle, 20000);  // a tick saw the idle link
    const DownloadStatus st = dm.status(id);
    QVERIFY(st.stalled);
    QCOMPARE(st.state, QStringLiteral("running"));
    QCOMPARE(st.bytes_done, half);
    QCOMPARE(st.bytes_per_sec, 0.0);
    QCOMPARE(st.eta_s, qint64(-1));
    QCOMPARE(server.openConnections(), 1);
    QCOMPARE(retrying.count(), 0);

    idle_clock += t.stall_ms;
    QVERIFY(finished.wait(20000));
    QCOMPARE(retrying.count(), 1);
    QVERIFY2(retrying.at(0).at(3).toString().startsWith(QStringLiteral("no data for")),
             qPrintable(retrying.at(0).at(3).toString()));
    QCOMPARE(server.rangeHeaders().value(0), QString());
    QCOMPARE(server.rangeHeaders().back(), QStringLiteral("bytes=%1-").arg(half));
    QCOMPARE(hashFile(dest).sha256, sha256Hex(body_));

    // The progress signals: a positive speed while bytes flowed, then 0 B/s at
    // `half` bytes while stalled, never a stale non-zero figure in between.
    bool saw_speed = false, saw_zero_at_half = false;
    for (const auto& args : progress) {
      const qint64 done = args.at(1).toLongLong();
      const double bps = args.at(3).toDouble();
      if (done < half && bps > 0) saw_speed = true;
      if (done == half && bps == 0.0) saw_zero_at_half = true;
    }
    QVERIFY(saw_speed);
    QVERIFY(saw_zero_at_half);
  }

  void deadLinkGivesUpWithDoublingBackoff() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    server.setMode(HttpTestServer::Mode::Stall, 0, /*first_only=*/false);  // headers, then nothing
    DownloadTimings t;
    t.stall_ms = 100;
    t.idle_ms = 50;
    t.progress_ms = 10;
    t.backoff_first_ms = 10;
    t.max_attempts = 4;
    AppDatabase db = AppDatabase::open((dir_.path() + "/dead.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, t);
    QSignalSpy retrying(&dm, &DownloadManager::retrying);
    QSignalSpy failed(&dm, &DownloadManager::failed);
    const QString dest = dir_.path() + "/dead.gguf";
    const qint64 id = dm.enqueue(server.url(), dest, sha256Hex(body_), body_.size());
    QVERIFY(failed.wait(20000));
    QVERIFY2(failed.at(0).at(1).toString().startsWith(QStringLiteral("gave up after 4 attempts")),
             qPrintable(failed.at(0).at(1).toString()));
    QCOMPARE(retrying.count(), 3);
    QCOMPARE(retrying.at(0).at(2).toInt(), 10);
    QCOMPARE(retrying.at(1).at(2).toInt(), 20);
    QCOMPARE(retrying.at(2).at(2).toInt(), 40);
    QCOMPARE(dm.status(id).state, QStringLiteral("failed"));
    QCOMPARE(store.get(id)->state, std::string("failed"));
    QVERIFY(!QFile::exists(dest));

    // A failed download can be retried by hand once the link is back.
    server.setMode(HttpTestServer::Mode::Normal);
    QSignalSpy finished(&dm, &DownloadManager::finished);
    dm.resume(id);
    QVERIFY(finished.wait(20000));
    QCOMPARE(hashFile(dest).sha256, sha256Hex(body_));
  }
};

QTEST_GUILESS_MAIN(TestDownloadStall)
#include "test_download_stall.moc"
