// Disk space: a download that cannot fit fails before it writes (size known from
// the catalog) or as soon as the server names the size, with the figures in the
// message, no retry loop, and nothing lost: after space is freed, resume
// completes it from what was kept. The probe is the real QStorageInfo unless a
// test puts a smaller disk behind it (filling the real disk is not an option).
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "app/core/app_database.h"
#include "app/core/download_store.h"
#include "app/core/model_registry.h"
#include "app/qt/download_manager.h"
#include "app/qt/file_hasher.h"
#include "support/download_timings.h"
#include "support/http_test_server.h"
#include "support/synthetic_gguf.h"
#include "synth/synthetic_model.h"

using namespace moe;
using moe::test::HttpTestServer;

class TestDownloadDiskSpace : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QByteArray body_ = test::syntheticGgufBytes("qwen2moe");

 private slots:
  void realProbe() {
    AppDatabase db = AppDatabase::open((dir_.path() + "/probe.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr);
    const QString dest = dir_.path() + "/x.gguf";
    QVERIFY(dm.diskSpaceProblem(dest, 1).isEmpty());
    const QString why = dm.diskSpaceProblem(dest, qint64(1) << 52);  // 4.5 PB
    QVERIFY2(why.startsWith("not enough disk space in " + dir_.path()), qPrintable(why));
    QVERIFY2(why.contains("4503599.63 GB still to download"), qPrintable(why));
  }

  void knownSizeFailsBeforeAnyRequest() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    AppDatabase db = AppDatabase::open((dir_.path() + "/known.db").toStdString());
    DownloadStore store(db);
    ModelRegistry registry(db);
    DownloadManager dm(store, &registry, test::quickDownloadTimings());
    qint64 free_bytes = body_.size();  // smaller than the file plus the margin
    dm.setFreeSpaceProbe([&](const QString&) { return free_bytes; });
    QSignalSpy failed(&dm, &DownloadManager::failed);
    QSignalSpy finished(&dm, &DownloadManager::finished);
    const QString dest = dir_.path() + "/known.gguf";
    const qint64 id = dm.enqueue(server.url(), dest, sha256Hex(body_), body_.size());
    QTRY_COMPARE(failed.count(), 1);
    const QString why = failed.at(0).at(1).toString();
    QVERIFY2(why.startsWith("not enough disk space"), qPrintable(why));
    QCOMPARE(dm.status(id).state, QStringLiteral("failed"));
    QCOMPARE(QString::fromStdString(store.get(id)->error), why);  // survives a restart
    QCOMPARE(server.requestCount(), 0);

    free_bytes = qint64(64) << 30;
    dm.resume(id);
    QTRY_COMPARE(finished.count(), 1);
    QFile f(dest);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), body_);
    QCOMPARE(registry.list().size(), size_t(1));
  }

  // No size in the catalog: the server's Content-Length decides, as soon as the
  // headers arrive (before any body byte is written). The .part stays; resume completes.
  void serverSizeFailsWithoutRetryAndResumeKeepsTheBytes() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    AppDatabase db = AppDatabase::open((dir_.path() + "/unknown.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, test::quickDownloadTimings());
    qint64 free_bytes = 1000;
    dm.setFreeSpaceProbe([&](const QString&) { return free_bytes; });
    QSignalSpy failed(&dm, &DownloadManager::failed);
    QSignalSpy finished(&dm, &DownloadManager::finished);
    QSignalSpy retrying(&dm, &DownloadManager::retrying);
    const QString dest = dir_.path() + "/unknown.gguf";
    const qint64 id = dm.enqueue(server.url(), dest);  // no checksum, no size
    QTRY_COMPARE(failed.count(), 1);
    QVERIFY2(failed.at(0).at(1).toString().contains(QString::number(double(body_.size()) / 1e9, 'f', 2)),
             qPrintable(failed.at(0).at(1).toString()));
    QCOMPARE(retrying.count(), 0);
    QCOMPARE(server.requestCount(), 1);
    QVERIFY(QFile::exists(DownloadManager::partPath(dest)));

    free_bytes = qint64(64) << 30;
    dm.resume(id);
    QTRY_COMPARE(finished.count(), 1);
    QFile f(dest);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(f.readAll(), body_);
    QVERIFY(!QFile::exists(DownloadManager::partPath(dest)));
  }

  // No published size and no Content-Length, a body that never ends: the free space
  // is checked as the bytes arrive, so the volume is not filled.
  void unknownSizeIsCheckedWhileItArrives() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    server.setMode(HttpTestServer::Mode::Endless, 0, /*first_only=*/false);
    AppDatabase db = AppDatabase::open((dir_.path() + "/endless.db").toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, test::quickDownloadTimings());
    dm.setFreeSpaceProbe([](const QString&) { return qint64(100) << 20; });  // 100 MiB left
    QSignalSpy failed(&dm, &DownloadManager::failed);
    const QString dest = dir_.path() + "/endless.gguf";
    dm.enqueue(server.url(), dest);  // no checksum, no size
    QTRY_COMPARE(failed.count(), 1);
    QVERIFY2(failed.at(0).at(1).toString().contains(QStringLiteral("not enough disk space")),
             qPrintable(failed.at(0).at(1).toString()));
    QCOMPARE(QFileInfo(DownloadManager::partPath(dest)).size(), qint64(0));
    QCOMPARE(server.requestCount(), 1);
  }
};

QTEST_GUILESS_MAIN(TestDownloadDiskSpace)
#include "test_download_disk_space.moc"
