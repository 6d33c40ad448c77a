// The speed figure over a sliding window and the ETA it implies, fed with
// explicit times (no clock), plus the streaming hasher against known digests.
#include <sys/stat.h>

#include <QTemporaryDir>
#include <QtTest>

#include "app/qt/download_speed.h"
#include "app/qt/file_hasher.h"

using namespace moe;

class TestDownloadSpeed : public QObject {
  Q_OBJECT

 private slots:
  void speedOverTheWindow() {
    SpeedMeter m(1000);
    QCOMPARE(m.bytesPerSecond(), 0.0);  // one sample or none: no figure
    m.sample(0, 0);
    QCOMPARE(m.bytesPerSecond(), 0.0);
    m.sample(500, 1000);
    QCOMPARE(m.bytesPerSecond(), 2000.0);
    m.sample(1000, 2000);
    QCOMPARE(m.bytesPerSecond(), 2000.0);
    // A faster second: the window forgets the first half second.
    m.sample(1500, 6000);
    m.sample(2000, 10000);
    QCOMPARE(m.bytesPerSecond(), 8000.0);  // (10000 - 2000) / 1 s
  }

  void nothingNewIsZero() {
    SpeedMeter m(1000);
    m.sample(0, 5000);
    m.sample(400, 5000);
    QCOMPARE(m.bytesPerSecond(), 0.0);
    m.reset();
    m.sample(0, 100);
    QCOMPARE(m.bytesPerSecond(), 0.0);
  }

  void eta() {
    QCOMPARE(SpeedMeter::etaSeconds(1000, 100.0), qint64(10));
    QCOMPARE(SpeedMeter::etaSeconds(1001, 100.0), qint64(11));  // rounded up
    QCOMPARE(SpeedMeter::etaSeconds(1000, 0.0), qint64(-1));
    QCOMPARE(SpeedMeter::etaSeconds(-1, 100.0), qint64(-1));
  }

  // FIPS 180-2 test vectors, and a file spanning several 4 MiB blocks against the
  // one-shot digest of the same bytes.
  void sha256() {
    QCOMPARE(sha256Hex("abc"),
             QStringLiteral("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    QCOMPARE(sha256Hex(""),
             QStringLiteral("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    QTemporaryDir dir;
    const QString path = dir.path() + "/blocks";
    QByteArray bytes(9 * 1024 * 1024 + 17, Qt::Uninitialized);
    for (qsizetype i = 0; i < bytes.size(); ++i) bytes[i] = char((i * 131) ^ (i >> 11));
    {
      QFile f(path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(bytes);
    }
    const FileHashResult r = hashFile(path);
    QVERIFY(r.ok);
    QCOMPARE(r.size, qint64(bytes.size()));
    QCOMPARE(r.sha256, sha256Hex(bytes));
    const FileHashResult missing = hashFile(dir.path() + "/absent");
    QVERIFY(!missing.ok);
    QVERIFY(missing.error.startsWith(QStringLiteral("cannot read")));
    const QString fifo = dir.path() + "/fifo";
    QCOMPARE(mkfifo(QFile::encodeName(fifo).constData(), 0600), 0);
    const FileHashResult special = hashFile(fifo);  // returns at once: no writer is waited for
    QVERIFY(!special.ok);
    QVERIFY2(special.error.endsWith(QStringLiteral("not a regular file")), qPrintable(special.error));
    std::atomic<bool> cancel{true};
    QCOMPARE(hashFile(path, &cancel).error, QStringLiteral("cancelled"));
  }
};

QTEST_GUILESS_MAIN(TestDownloadSpeed)
#include "test_download_speed.moc"
