// Verification: a file whose SHA-256 or size is wrong fails with the figures
// named, the final file never appears, the .part is removed and nothing is
// registered; HTTP errors fail at once (no retry loop on a 404); bytes that match
// their checksum but are not a model are refused by the GGUF reader.
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

class TestDownloadChecksum : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  QByteArray body_ = test::syntheticGgufBytes("qwen2moe");
  int n_ = 0;

  struct Run {
    QString dest;
    QString error;
    QString state;
    std::vector<ModelRecord> registered;
    int retries = 0;
  };

  // Downloads from `server` with the given expectations and waits for the end.
  Run download(HttpTestServer& server, const QString& sha, qint64 size, const QString& path = "/model.gguf") {
    Run r;
    AppDatabase db = AppDatabase::open((dir_.path() + QStringLiteral("/c%1.db").arg(++n_)).toStdString());
    DownloadStore store(db);
    ModelRegistry registry(db);
    DownloadManager dm(store, &registry, test::quickDownloadTimings());
    QSignalSpy failed(&dm, &DownloadManager::failed);
    QSignalSpy finished(&dm, &DownloadManager::finished);
    QSignalSpy retrying(&dm, &DownloadManager::retrying);
    r.dest = dir_.path() + QStringLiteral("/m%1.gguf").arg(n_);
    const qint64 id = dm.enqueue(server.url(path), r.dest, sha, size);
    if (!QTest::qWaitFor([&] { return failed.count() + finished.count() > 0; }, 20000)) return r;
    r.error = failed.isEmpty() ? QString() : failed.at(0).at(1).toString();
    r.state = dm.status(id).state;
    r.registered = registry.list();
    r.retries = retrying.count();
    if (QString::fromStdString(store.get(id)->error) != r.error) r.state = "database disagrees";
    return r;
  }

 private slots:
  void wrongContentIsRejected() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    server.setMode(HttpTestServer::Mode::WrongContent, 0, /*first_only=*/false);
    const Run r = download(server, sha256Hex(body_), body_.size());
    QCOMPARE(r.state, QStringLiteral("failed"));
    QVERIFY2(r.error.startsWith(QStringLiteral("checksum mismatch: expected SHA-256 ") + sha256Hex(body_)),
             qPrintable(r.error));
    QVERIFY(!QFile::exists(r.dest));
    QVERIFY(!QFile::exists(DownloadManager::partPath(r.dest)));
    QVERIFY(r.registered.empty());
  }

  void wrongPublishedChecksumIsRejected() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    const QString other = sha256Hex("something else");
    const Run r = download(server, other, body_.size());
    QCOMPARE(r.state, QStringLiteral("failed"));
    QVERIFY2(r.error.contains(QStringLiteral("got ") + sha256Hex(body_)), qPrintable(r.error));
    QVERIFY(!QFile::exists(r.dest));
    QVERIFY(r.registered.empty());
  }

  // No published checksum: the size alone is checked.
  void wrongSizeIsRejected() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    const Run r = download(server, QString(), body_.size() + 1);
    QCOMPARE(r.state, QStringLiteral("failed"));
    QCOMPARE(
        r.error,
        QStringLiteral("size mismatch: expected %1 bytes, got %2").arg(body_.size() + 1).arg(body_.size()));
    QVERIFY(!QFile::exists(r.dest));
    QVERIFY(r.registered.empty());
  }

  void sizeOnlyCheckAcceptsTheRightFile() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    const Run r = download(server, QString(), body_.size());
    QCOMPARE(r.state, QStringLiteral("done"));
    QVERIFY(QFile::exists(r.dest));
    QCOMPARE(r.registered.size(), size_t(1));
    // The registry keeps the hash computed while verifying.
    QCOMPARE(QString::fromStdString(r.registered[0].sha256), sha256Hex(body_));
    QCOMPARE(r.registered[0].arch, std::string("qwen2moe"));
  }

  void notFoundFailsWithoutRetrying() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    const Run r = download(server, sha256Hex(body_), body_.size(), "/missing");
    QCOMPARE(r.state, QStringLiteral("failed"));
    QVERIFY2(r.error.startsWith(QStringLiteral("HTTP 404")), qPrintable(r.error));
    QCOMPARE(r.retries, 0);
    QVERIFY(!QFile::exists(r.dest));
  }

  // A followed redirect downloads the file; a redirect loop fails at once with
  // words for it, not with the last hop's "HTTP 302 Found".
  void redirectsAreFollowedAndALoopIsSaidPlainly() {
    HttpTestServer server(body_);
    QVERIFY(server.start());
    const Run moved = download(server, sha256Hex(body_), body_.size(), "/moved");
    QCOMPARE(moved.state, QStringLiteral("done"));
    const Run loop = download(server, sha256Hex(body_), body_.size(), "/loop");
    QCOMPARE(loop.state, QStringLiteral("failed"));
    QVERIFY2(loop.error.startsWith(QStringLiteral("the server redirected too many times")),
             qPrintable(loop.error));
    QCOMPARE(loop.retries, 0);
    QVERIFY(!QFile::exists(loop.dest));
  }

  void matchingBytesThatAreNotAModelAreRefused() {
    const QByteArray junk(50000, 'j');
    HttpTestServer server(junk);
    QVERIFY(server.start());
    const Run r = download(server, sha256Hex(junk), junk.size());
    QCOMPARE(r.state, QStringLiteral("failed"));
    QVERIFY2(r.error.startsWith(QStringLiteral("not a usable GGUF model: ")), qPrintable(r.error));
    QVERIFY(!QFile::exists(r.dest));
    QVERIFY(r.registered.empty());
  }
};

QTEST_GUILESS_MAIN(TestDownloadChecksum)
#include "test_download_checksum.moc"
