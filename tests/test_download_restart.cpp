// Restart: the queue lives in the database. A manager destroyed mid-download
// (the app closed) leaves the .part and a "queued" row; a new manager on the same
// database file resumes it with Range from the .part's size. Paused downloads stay
// paused, failed ones stay failed (offered for retry), a row left "running" by a
// crash is queued again, and a .part that is already complete is verified without
// downloading anything.
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

namespace {

DownloadTimings fastTimings() {
  DownloadTimings t = test::quickDownloadTimings();
  t.persist_ms = 20;  // the restart checks read what was persisted
  return t;
}

}  // namespace

class TestDownloadRestart : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QByteArray body_ = test::syntheticGgufBytes("llama");

 private slots:
  void queueSurvivesANewManager() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    server.setPacing(4096, 5);
    const QString db_path = dir_.path() + "/app.db";
    const QString dest = dir_.path() + "/a.gguf", paused_dest = dir_.path() + "/b.gguf";
    qint64 id = 0, paused_id = 0, kept = 0;
    {
      AppDatabase db = AppDatabase::open(db_path.toStdString());
      DownloadStore store(db);
      DownloadManager dm(store, nullptr, fastTimings());
      id = dm.enqueue(server.url("/a.gguf"), dest, sha256Hex(body_), body_.size(), "cat-a");
      paused_id = dm.enqueue(server.url("/b.gguf"), paused_dest, sha256Hex(body_), body_.size());
      dm.pause(paused_id);  // still queued behind the first: paused before it starts
      QTRY_VERIFY_WITH_TIMEOUT(dm.status(id).bytes_done >= body_.size() / 3, 20000);
      QCOMPARE(dm.status(paused_id).state, QStringLiteral("paused"));
    }  // the app closes mid-download
    kept = QFileInfo(DownloadManager::partPath(dest)).size();
    QVERIFY(kept > 0 && kept < body_.size());
    QVERIFY(!QFile::exists(dest));
    QCOMPARE(server.requestCount(), 1);

    AppDatabase db = AppDatabase::open(db_path.toStdString());
    DownloadStore store(db);
    {
      const auto row = store.get(id);
      QVERIFY(row);
      QCOMPARE(row->state, std::string("queued"));
      QCOMPARE(row->catalog_id, std::string("cat-a"));
    }
    ModelRegistry registry(db);
    DownloadManager dm(store, &registry, fastTimings());
    QCOMPARE(dm.downloads().size(), 2);
    QCOMPARE(dm.status(id).bytes_done, kept);  // the .part, not the last saved figure
    QCOMPARE(dm.status(paused_id).state, QStringLiteral("paused"));
    QSignalSpy finished(&dm, &DownloadManager::finished);
    QVERIFY(finished.wait(20000));
    QCOMPARE(finished.at(0).at(0).toLongLong(), id);
    QCOMPARE(server.rangeHeaders().back(), QStringLiteral("bytes=%1-").arg(kept));
    QCOMPARE(hashFile(dest).sha256, sha256Hex(body_));
    QVERIFY(registry.findByPath(dest.toStdString()));
    // The manager schedules the next download as it reports this one finished (in the
    // same call): a paused one started by mistake would be running by now.
    QCOMPARE(dm.status(paused_id).state, QStringLiteral("paused"));
    QVERIFY(!QFile::exists(paused_dest));
    QCOMPARE(store.unfinished().size(), size_t(1));  // the paused one
  }

  void crashedRunningRowIsQueuedAndCompletePartIsOnlyVerified() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    const QString db_path = dir_.path() + "/crash.db";
    const QString dest = dir_.path() + "/c.gguf";
    qint64 id = 0;
    {
      AppDatabase db = AppDatabase::open(db_path.toStdString());
      DownloadStore store(db);
      DownloadRecord r;
      r.url = server.url().toString().toStdString();
      r.dest_path = dest.toStdString();
      r.sha256 = sha256Hex(body_).toStdString();
      r.expected_size = body_.size();
      r.state = "running";  // what a crash mid-download leaves behind
      id = store.add(r);
      QFile part(DownloadManager::partPath(dest));
      QVERIFY(part.open(QIODevice::WriteOnly));
      part.write(body_);  // every byte had arrived
    }
    AppDatabase db = AppDatabase::open(db_path.toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, fastTimings());
    QCOMPARE(dm.status(id).state, QStringLiteral("queued"));
    QSignalSpy finished(&dm, &DownloadManager::finished);
    QVERIFY(finished.wait(20000));
    QCOMPARE(server.requestCount(), 0);  // verified from disk, nothing fetched
    QCOMPARE(hashFile(dest).sha256, sha256Hex(body_));
    QCOMPARE(store.get(id)->state, std::string("done"));
  }

  void failedRowsStayFailedUntilRetried() {
    const QString db_path = dir_.path() + "/failed.db";
    qint64 id = 0;
    {
      AppDatabase db = AppDatabase::open(db_path.toStdString());
      DownloadStore store(db);
      DownloadRecord r;
      r.url = "http://127.0.0.1:9/x.gguf";
      r.dest_path = (dir_.path() + "/x.gguf").toStdString();
      r.state = "failed";
      r.error = "checksum mismatch: test";
      id = store.add(r);
    }
    AppDatabase db = AppDatabase::open(db_path.toStdString());
    DownloadStore store(db);
    DownloadManager dm(store, nullptr, fastTimings());
    QCoreApplication::processEvents();  // the constructor's first schedule(), queued, has run
    QCOMPARE(dm.status(id).state, QStringLiteral("failed"));
    QCOMPARE(dm.status(id).error, QStringLiteral("checksum mismatch: test"));
  }
};

QTEST_GUILESS_MAIN(TestDownloadRestart)
#include "test_download_restart.moc"
