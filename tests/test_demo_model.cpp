// The trained demo model (resources/models/, docs/DEMO-MODEL.md) as a user meets it:
// its vocabulary encodes as the sentencepiece model it was trained with, and
// `moechat-cli generate --demo` runs it (from build/share/moechat/, where the build
// puts it beside the programs) and writes English: at least 80% of the words of a
// seeded 64-token completion are in Debian's wamerican word list. Nothing here
// trains or measures time.
#include <QtTest>

#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QProcessEnvironment>
#include <QRegularExpression>
#include <QSet>

#include "inference/tokenizer/tokenizer.h"
#include "models/gguf.h"

namespace {

const QString kModel =
    QStringLiteral(MOECHAT_TEST_DATA "/../../resources/models/moechat-demo-brown-q8_0.gguf");
const QString kWordList = QStringLiteral("/usr/share/dict/american-english");  // Debian package wamerican

struct Run {
  int code = -1;
  QString out, err;
};

Run runCli(const QStringList& args, const QString& demo_model_env = {}) {
  QProcess p;
  if (!demo_model_env.isEmpty()) {
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("MOECHAT_DEMO_MODEL"), demo_model_env);
    p.setProcessEnvironment(env);
  }
  p.start(MOECHAT_CLI, args);
  if (!p.waitForStarted() || !p.waitForFinished(300000)) return {};
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

QSet<QString> loadWordList() {
  QSet<QString> words;
  QFile f(kWordList);
  if (!f.open(QIODevice::ReadOnly | QIODevice::Text)) return words;
  while (!f.atEnd()) words.insert(QString::fromUtf8(f.readLine()).trimmed().toLower());
  return words;
}

struct WordCount {
  int words = 0, known = 0;
  QStringList unknown;
};

// Whitespace-separated words, lowercased, punctuation stripped from both ends;
// pieces without a letter (numbers, dashes) are not words and are not counted.
WordCount countKnownWords(const QString& text, const QSet<QString>& dict) {
  static const QRegularExpression edges(QStringLiteral("^[^\\p{L}\\p{N}]+|[^\\p{L}\\p{N}]+$"));
  static const QRegularExpression letter(QStringLiteral("\\p{L}"));
  WordCount c;
  for (QString w : text.split(QRegularExpression(QStringLiteral("\\s+")), Qt::SkipEmptyParts)) {
    w = w.toLower().remove(edges);
    if (!w.contains(letter)) continue;
    ++c.words;
    if (dict.contains(w))
      ++c.known;
    else
      c.unknown << w;
  }
  return c;
}

}  // namespace

class DemoModelTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QVERIFY2(QFile::exists(kModel), qPrintable("missing " + kModel + " (docs/DEMO-MODEL.md)"));
    QVERIFY2(QFile::exists(kWordList),
             "missing /usr/share/dict/american-english: apt-get install wamerican "
             "(tools/install-deps.sh)");
  }

  // Ids from `spm_encode --output_format=id` with the sentencepiece model the file's
  // vocabulary came from (tools/demo_model/.cache/spm/demo4096.model): the engine,
  // which rebuilds a model from the GGUF pieces, must split text the same way, or
  // the weights see token sequences they were never trained on.
  void encodesAsTrainingDid_data() {
    QTest::addColumn<QString>("text");
    QTest::addColumn<QList<int>>("ids");
    QTest::newRow("sentence")
        << QStringLiteral(
               "The jury said it did find that many of Georgia's registration and election laws \"are "
               "outmoded or inadequate and often ambiguous\".")
        << QList<int>{339,  503,  1172, 560, 345,  653, 1104, 331, 786,  280,  2101, 4038, 731,
                      4051, 4028, 907,  382, 1383, 294, 1275, 485, 3631, 347,  576,  490,  4035,
                      375,  278,  377,  288, 603,  402, 396,  294, 1492, 2663, 335,  3378, 453};
    QTest::newRow("chat turn") << QStringLiteral("[INST] Hello there, how are you? [/INST]")
                               << QList<int>{4021, 3,   441, 308,  4025, 534, 4042,
                                             755,  397, 412, 4064, 4021, 4};
    // Digits split one by one; bytes outside the vocabulary fall back to <0xXX> pieces.
    QTest::newRow("digits and bytes")
        << QStringLiteral("In 1961, 42 men paid $3.50 each -- na\u00efve caf\u00e9.")
        << QList<int>{527,  4021, 4061, 4080, 4087, 4061, 4042, 4021, 4088, 4076,
                      863,  2559, 1074, 4082, 4043, 4079, 4066, 882,  448,  302,
                      4024, 200,  180,  313,  1333, 4036, 200,  174,  4043};
  }

  void encodesAsTrainingDid() {
    QFETCH(QString, text);
    QFETCH(QList<int>, ids);
    const auto tok = moe::Tokenizer::fromGguf(moe::gguf::GgufFile::open(kModel.toStdString()));
    const std::vector<int32_t> got = tok->encode(text.toStdString(), false, false);
    QCOMPARE(QList<int>(got.begin(), got.end()), ids);
    QCOMPARE(QString::fromStdString(tok->decode(got)), text);
  }

  // The acceptance check: a seeded completion of "Once upon a time".
  void writesEnglish() {
    const QSet<QString> dict = loadWordList();
    QVERIFY(dict.size() > 50000);
    const Run r = runCli({"generate", "--demo", "-p", "Once upon a time", "-n", "64", "--temp", "0.7",
                          "--seed", "16", "--threads", "2"});
    QVERIFY2(r.code == 0, qPrintable("moechat-cli failed: " + r.err));
    QVERIFY2(r.out.startsWith("Once upon a time"), qPrintable(r.out));
    const QString completion = r.out.mid(QStringLiteral("Once upon a time").size());
    const WordCount c = countKnownWords(completion, dict);
    qInfo("%d of %d words in the word list; not in it: %s", c.known, c.words,
          qPrintable(c.unknown.join(' ')));
    QVERIFY2(c.words >= 20, qPrintable("too few words: " + completion));
    QVERIFY2(c.known * 5 >= c.words * 4, qPrintable("fewer than 80% English words: " + completion));
  }

  // --demo is the shipped file (the same bytes as resources/models/), described as a
  // real model; --demo-random is the built-in random one, which says so; a missing
  // file is an error that says where it looked and what runs without it.
  void demoFlags() {
    const Run info = runCli({"info", "--demo"});
    QVERIFY2(info.code == 0, qPrintable(info.err));
    QVERIFY2(info.out.contains("moechat demo (Brown corpus"), qPrintable(info.out));
    QVERIFY2(!info.out.contains("random weights"), qPrintable(info.out));
    QFile shipped(QFileInfo(QStringLiteral(MOECHAT_CLI)).absolutePath() +
                  "/../share/moechat/moechat-demo.gguf"),
        source(kModel);
    QVERIFY(shipped.open(QIODevice::ReadOnly) && source.open(QIODevice::ReadOnly));
    QVERIFY2(shipped.readAll() == source.readAll(),
             "share/moechat/moechat-demo.gguf differs from resources/models/");

    const Run random = runCli({"info", "--demo-random"});
    QVERIFY2(random.code == 0 && random.out.contains("random weights"), qPrintable(random.out + random.err));

    const Run missing =
        runCli({"generate", "--demo", "-n", "4"}, QStringLiteral("/nonexistent/moechat-demo.gguf"));
    QCOMPARE(missing.code, 1);
    QVERIFY2(
        missing.err.contains("the demo model file is missing (looked for /nonexistent/moechat-demo.gguf)") &&
            missing.err.contains("--demo-random"),
        qPrintable(missing.err));
    QCOMPARE(runCli({"generate", "--demo", "--demo-random"}).code, 2);
  }
};

QTEST_GUILESS_MAIN(DemoModelTest)
#include "test_demo_model.moc"
