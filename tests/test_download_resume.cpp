// Resume: a connection dropped half way is picked up with "Range: bytes=N-" from
// the .part's size, and the finished file is byte-for-byte the served one (its
// SHA-256 matches). Also: a server that ignores Range restarts the .part from
// zero; a pause keeps the .part and the resume asks for the rest.
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "app/core/app_database.h"
#include "app/core/download_store.h"
#include "app/core/model_registry.h"
#include "app/qt/download_manager.h"
#include "app/qt/file_hasher.h"
#include "support/http_test_server.h"
#include "support/synthetic_gguf.h"
#include "synth/synthetic_model.h"

using namespace moe;
using moe::test::HttpTestServer;

namespace {

QByteArray syntheticGguf() { return test::syntheticGgufBytes("olmoe"); }

QByteArray readAll(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

QStringList withoutRepeats(const QStringList& l) {
  QStringList out;
  for (const auto& x : l)
    if (out.isEmpty() || out.back() != x) out.append(x);
  return out;
}

// The retries counted here are the server's drops only: the link's idle clock stands
// still, so a pause of a busy machine is never taken for a stall.
DownloadTimings fastTimings() {
  DownloadTimings t;
  t.stall_ms = 5000;
  t.idle_ms = 1000;
  t.idle_clock_ms = [] { return qint64{0}; };
  t.backoff_first_ms = 20;
  t.backoff_max_ms = 200;
  t.progress_ms = 20;
  t.persist_ms = 50;
  return t;
}

}  // namespace

class TestDownloadResume : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QByteArray body_ = syntheticGguf();

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    QVERIFY2(body_.size() > 64 * 1024, "the synthetic model should span many network chunks");
  }

  void droppedHalfWayResumesWithRange() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    const qint64 half = body_.size() / 2;
    server.setMode(HttpTestServer::Mode::Drop, half, /*first_only=*/true);

    AppDatabase db = AppDatabase::open((dir_.path() + "/resume.db").toStdString());
    DownloadStore store(db);
    ModelRegistry registry(db);
    DownloadManager dm(store, &registry, fastTimings());
    QSignalSpy finished(&dm, &DownloadManager::finished);
    QSignalSpy failed(&dm, &DownloadManager::failed);
    QSignalSpy retrying(&dm, &DownloadManager::retrying);

    const QString dest = dir_.path() + "/models/olmoe.gguf";
    const qint64 id = dm.enqueue(server.url(), dest, sha256Hex(body_), body_.size());
    QVERIFY(finished.wait(20000));
    QCOMPARE(failed.count(), 0);
    QCOMPARE(finished.at(0).at(0).toLongLong(), id);
    QCOMPARE(finished.at(0).at(1).toString(), dest);

    // The server saw a plain request, then one resuming exactly where the drop left off.
    QCOMPARE(readAll(dest), body_);
    QCOMPARE(retrying.count(), 1);
    QCOMPARE(withoutRepeats(server.rangeHeaders()),
             QStringList({QString(), QStringLiteral("bytes=%1-").arg(half)}));
    QCOMPARE(hashFile(dest).sha256, sha256Hex(body_));
    QVERIFY(!QFile::exists(DownloadManager::partPath(dest)));

    const DownloadStatus st = dm.status(id);
    QCOMPARE(st.state, QStringLiteral("done"));
    QCOMPARE(st.bytes_done, qint64(body_.size()));
    QCOMPARE(store.get(id)->state, std::string("done"));
    const auto rec = registry.findByPath(dest.toStdString());
    QVERIFY(rec);
    QCOMPARE(QString::fromStdString(rec->sha256), sha256Hex(body_));
    QCOMPARE(rec->arch, std::string("olmoe"));
    QCOMPARE(rec->size_bytes, qint64(body_.size()));
    QCOMPARE(QString::fromStdString(rec->source_url), server.url().toString());
  }

  void droppedOnEveryRequestStillCompletes() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    const qint64 step = body_.size() / 3 + 1;  // each response stops after `step` bytes
    server.setMode(HttpTestServer::Mode::Drop, step, /*first_only=*/false);
    AppDatabase db = AppDatabase::open((dir_.path() + "/every.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, fastTimings());
    QSignalSpy finished(&dm, &DownloadManager::finished);
    QSignalSpy retrying(&dm, &DownloadManager::retrying);
    const QString dest = dir_.path() + "/every.gguf";
    dm.enqueue(server.url(), dest, sha256Hex(body_), body_.size());
    QVERIFY(finished.wait(20000));
    QCOMPARE(readAll(dest), body_);
    QCOMPARE(retrying.count(), 2);
    // Qt's HTTP layer may itself re-send a request whose connection closed early
    // (the same Range twice in a row); the offsets asked for are what matter.
    QCOMPARE(withoutRepeats(server.rangeHeaders()),
             QStringList({QString(), QStringLiteral("bytes=%1-").arg(step),
                          QStringLiteral("bytes=%1-").arg(2 * step)}));
  }

  // A .part whose bytes are not the file's prefix, and a server that ignores
  // Range: the 200 answer restarts the .part from byte 0.
  void serverIgnoringRangeRestartsFromZero() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    server.setMode(HttpTestServer::Mode::IgnoreRange, 0, /*first_only=*/false);
    const QString dest = dir_.path() + "/ignore.gguf";
    {
      QFile part(DownloadManager::partPath(dest));
      QVERIFY(part.open(QIODevice::WriteOnly));
      part.write(QByteArray(1000, 'x'));
    }
    AppDatabase db = AppDatabase::open((dir_.path() + "/ignore.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, fastTimings());
    QSignalSpy finished(&dm, &DownloadManager::finished);
    QSignalSpy failed(&dm, &DownloadManager::failed);
    dm.enqueue(server.url(), dest, sha256Hex(body_), body_.size());
    QVERIFY(finished.wait(20000));
    QCOMPARE(failed.count(), 0);
    QCOMPARE(readAll(dest), body_);
    QCOMPARE(withoutRepeats(server.rangeHeaders()), QStringList({QStringLiteral("bytes=1000-")}));
  }

  // A server that ignores Range and also ends every response early: each attempt
  // starts over at byte 0 and "makes progress", so only the restart bound ends it.
  void serverIgnoringRangeAndDroppingGivesUp() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    server.setMode(HttpTestServer::Mode::IgnoreRangeDrop, body_.size() / 2, /*first_only=*/false);
    AppDatabase db = AppDatabase::open((dir_.path() + "/ignore-drop.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, fastTimings());
    QSignalSpy failed(&dm, &DownloadManager::failed);
    QSignalSpy retrying(&dm, &DownloadManager::retrying);
    const QString dest = dir_.path() + "/ignore-drop.gguf";
    const qint64 id = dm.enqueue(server.url(), dest, sha256Hex(body_), body_.size());
    QVERIFY(failed.wait(20000));
    QVERIFY2(dm.status(id).error.contains(QStringLiteral("ignores resume requests")),
             qPrintable(dm.status(id).error));
    QCOMPARE(retrying.count(), 4);  // the first drop, then one per restart from zero
    QVERIFY(!QFile::exists(dest));
  }

  // A body that does not end: the bytes stop at the published size, never more.
  void bodyLongerThanThePublishedSizeIsCutOff() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    server.setMode(HttpTestServer::Mode::Endless, 0, /*first_only=*/false);
    AppDatabase db = AppDatabase::open((dir_.path() + "/endless.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, fastTimings());
    QSignalSpy failed(&dm, &DownloadManager::failed);
    const QString dest = dir_.path() + "/endless.gguf";
    const qint64 id = dm.enqueue(server.url(), dest, sha256Hex(body_), body_.size());
    QVERIFY(failed.wait(20000));
    QVERIFY2(
        dm.status(id).error.contains(QStringLiteral("more than the %1 bytes expected").arg(body_.size())),
        qPrintable(dm.status(id).error));
    QVERIFY(QFileInfo(DownloadManager::partPath(dest)).size() <= body_.size());
    QCOMPARE(server.requestCount(), 1);  // no retry
  }

  // A 206 whose Content-Range does not start where the .part ends would corrupt
  // the file if appended: the manager drops it and starts over from byte 0.
  void misalignedContentRangeRestartsFromZero() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    const qint64 half = body_.size() / 2;
    server.setScript({{HttpTestServer::Mode::Drop, half}, {HttpTestServer::Mode::ShiftedRange, 0}});
    AppDatabase db = AppDatabase::open((dir_.path() + "/shifted.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, fastTimings());
    QSignalSpy finished(&dm, &DownloadManager::finished);
    QSignalSpy retrying(&dm, &DownloadManager::retrying);
    const QString dest = dir_.path() + "/shifted.gguf";
    dm.enqueue(server.url(), dest, sha256Hex(body_), body_.size());
    QVERIFY(finished.wait(20000));
    QCOMPARE(readAll(dest), body_);
    QCOMPARE(retrying.count(), 2);
    QVERIFY2(retrying.at(1).at(3).toString().contains(QStringLiteral("wrong offset")),
             qPrintable(retrying.at(1).at(3).toString()));
    QCOMPARE(withoutRepeats(server.rangeHeaders()),
             QStringList({QString(), QStringLiteral("bytes=%1-").arg(half), QString()}));
  }

  void pauseKeepsThePartAndResumeAsksForTheRest() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    server.setPacing(4096, 5);  // slow enough to pause part way
    AppDatabase db = AppDatabase::open((dir_.path() + "/pause.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, fastTimings());
    QSignalSpy finished(&dm, &DownloadManager::finished);
    const QString dest = dir_.path() + "/pause.gguf";
    const qint64 id = dm.enqueue(server.url(), dest, sha256Hex(body_), body_.size());
    QTRY_VERIFY_WITH_TIMEOUT(dm.status(id).bytes_done >= body_.size() / 4, 20000);
    dm.pause(id);
    QCOMPARE(dm.status(id).state, QStringLiteral("paused"));
    QCOMPARE(store.get(id)->state, std::string("paused"));
    const qint64 kept = QFileInfo(DownloadManager::partPath(dest)).size();
    QVERIFY(kept > 0 && kept < body_.size());
    QCOMPARE(dm.status(id).bytes_done, kept);
    // The pause closed the connection (the server sees it go), so nothing more can arrive.
    QTRY_COMPARE_WITH_TIMEOUT(server.openConnections(), 0, 20000);
    QCoreApplication::processEvents();
    QCOMPARE(QFileInfo(DownloadManager::partPath(dest)).size(), kept);
    QCOMPARE(withoutRepeats(server.rangeHeaders()), QStringList({QString()}));

    // Asking again for the same destination resumes the queued download, no second writer.
    QCOMPARE(dm.enqueue(server.url(), dest, sha256Hex(body_), body_.size()), id);
    QCOMPARE(store.all().size(), size_t(1));
    QVERIFY(finished.wait(20000));
    QCOMPARE(readAll(dest), body_);
    QCOMPARE(withoutRepeats(server.rangeHeaders()),
             QStringList({QString(), QStringLiteral("bytes=%1-").arg(kept)}));
  }

  void cancelRemovesThePart() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    server.setPacing(4096, 5);
    AppDatabase db = AppDatabase::open((dir_.path() + "/cancel.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, fastTimings());
    const QString dest = dir_.path() + "/cancel.gguf";
    const qint64 id = dm.enqueue(server.url(), dest, sha256Hex(body_), body_.size());
    QTRY_VERIFY_WITH_TIMEOUT(dm.status(id).bytes_done > 0, 20000);
    dm.cancel(id);
    QCOMPARE(dm.status(id).id, qint64(0));
    QVERIFY(!store.get(id));
    QVERIFY(!QFile::exists(DownloadManager::partPath(dest)));
    QVERIFY(!QFile::exists(dest));
  }

  void badInputIsRefused() {
    AppDatabase db = AppDatabase::open((dir_.path() + "/bad.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, fastTimings());
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, dm.enqueue(QUrl("ftp://x/y.gguf"), dir_.path() + "/a"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, dm.enqueue(QUrl("http://127.0.0.1/y.gguf"), QString()));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             dm.enqueue(QUrl("http://127.0.0.1/y.gguf"), dir_.path() + "/a", "abc"));
    QVERIFY(store.all().empty());
  }
};

QTEST_GUILESS_MAIN(TestDownloadResume)
#include "test_download_resume.moc"
