// The layers' include rules, read from the source tree: widgets (ui/) include no
// engine header (inference/, offload/, models/) and reach the engine only through
// app/; app/core and the engine include no Qt header; nothing below the desktop
// program (desktop/) includes it; product code includes no test header.
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QProcess>
#include <QRegularExpression>
#include <QtTest>

namespace {

const QString kRoot = QStringLiteral(MOECHAT_TEST_DATA "/../..");

// "file:line: #include ..." for every include in `folder` (recursive) that matches `pattern`.
QStringList includesMatching(const QString& folder, const QRegularExpression& pattern) {
  QStringList hits;
  QDirIterator it(QDir(kRoot).filePath(folder), {"*.h", "*.cpp", "*.cu", "*.cuh"}, QDir::Files,
                  QDirIterator::Subdirectories);
  while (it.hasNext()) {
    const QString path = it.next();
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
      hits << path + ": unreadable";
      continue;
    }
    int line = 0;
    while (!f.atEnd()) {
      const QString text = QString::fromUtf8(f.readLine()).trimmed();
      ++line;
      if (text.startsWith("#include") && pattern.match(text).hasMatch())
        hits << QString("%1:%2: %3").arg(QDir(kRoot).relativeFilePath(path)).arg(line).arg(text);
    }
  }
  return hits;
}

int sourceFiles(const QString& folder) {
  int n = 0;
  QDirIterator it(QDir(kRoot).filePath(folder), {"*.h", "*.cpp"}, QDir::Files, QDirIterator::Subdirectories);
  while (it.hasNext()) {
    it.next();
    ++n;
  }
  return n;
}

}  // namespace

class LayeringTest : public QObject {
  Q_OBJECT

 private slots:
  void theRuleSeesTheTree() {
    // The checks below would pass on an empty folder: make sure they read the real one.
    QVERIFY2(sourceFiles("ui") > 20, qPrintable(kRoot));
    QVERIFY(sourceFiles("app/core") > 20);
    const QRegularExpression any("^#include\\s+\"app/");
    QVERIFY(!includesMatching("ui", any).isEmpty());
  }

  void widgetsIncludeNoEngineHeader() {
    const QStringList hits = includesMatching(
        "ui", QRegularExpression("^#include\\s+\"(inference|offload|runtime|quant|synth|models)/"));
    QVERIFY2(hits.isEmpty(), qPrintable(hits.join('\n')));
  }

  // The desktop program (desktop/) stands on ui/ and app/: nothing below includes it.
  void nothingBelowIncludesTheDesktopProgram() {
    QVERIFY(sourceFiles("desktop") > 1);
    const QRegularExpression desktop("^#include\\s+\"desktop/");
    QStringList hits;
    for (const char* folder : {"ui", "app", "inference", "offload", "runtime", "quant", "synth", "models"})
      hits << includesMatching(folder, desktop);
    QVERIFY2(hits.isEmpty(), qPrintable(hits.join('\n')));
  }

  void coreAndEngineIncludeNoQt() {
    const QRegularExpression qt("^#include\\s+<Q[A-Za-z]+");
    QStringList hits;
    for (const char* folder : {"app/core", "inference", "offload", "runtime", "quant", "synth", "models"})
      hits << includesMatching(folder, qt);
    QVERIFY2(hits.isEmpty(), qPrintable(hits.join('\n')));
  }

  // Product code never includes test code: the CUDA stand-in's control API, the test
  // fixtures and helpers (a build on the stand-in gets the stand-in's facts from
  // tests/cuda_standin/runtime_facts.cpp).
  void productCodeIncludesNoTestHeader() {
    const QRegularExpression test_header(
        "^#include\\s+\"(tests/|cuda_standin\\.h|cuda_standin_device\\.h|gpu_suite\\.h|test_log\\.h)");
    QStringList hits;
    for (const char* folder :
         {"desktop", "ui", "app", "inference", "offload", "runtime", "quant", "synth", "models"})
      hits << includesMatching(folder, test_header);
    QVERIFY2(hits.isEmpty(), qPrintable(hits.join('\n')));
  }

  // Every include between the product's folders points down the layers that
  // docs/ARCHITECTURE.md draws (tools/layers/include_arrows.py counts them from the
  // tree; it names an arrow that goes up and exits 1).
  void noIncludeGoesUpALayer() {
    QProcess count;
    count.setWorkingDirectory(kRoot);
    count.start("python3", {"tools/layers/include_arrows.py"});
    QVERIFY(count.waitForFinished(60000));
    if (count.exitCode() == 2) QSKIP("not a git checkout: the tree's files are not known");
    const QString out = QString::fromUtf8(count.readAllStandardOutput());
    const QString err = QString::fromUtf8(count.readAllStandardError());
    QVERIFY2(out.contains("offload         -> inference"), qPrintable(out + err));  // it read the tree
    QVERIFY2(count.exitStatus() == QProcess::NormalExit && count.exitCode() == 0, qPrintable(out + err));
  }

  // docs/TEST-INDEX.md (which test includes which product header) is what
  // tools/layers/test_index.py makes of the tree today.
  void theTestIndexIsCurrent() {
    QProcess check;
    check.setWorkingDirectory(kRoot);
    check.start("python3", {"tools/layers/test_index.py", "--check"});
    QVERIFY(check.waitForFinished(60000));
    if (check.exitCode() == 2) QSKIP("not a git checkout: the tree's files are not known");
    QVERIFY2(check.exitStatus() == QProcess::NormalExit && check.exitCode() == 0,
             qPrintable(QString::fromUtf8(check.readAllStandardError())));
  }
};

QTEST_GUILESS_MAIN(LayeringTest)
#include "test_layering.moc"
