// moechat-cli trace / train / eval-predictor on the demo model, as a user runs
// them: real files, the comparison table as text and JSON, resume, bad input.
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>

namespace {

struct Run {
  int code = -1;
  QString out, err;
};

Run cli(const QStringList& args, const QString& cwd) {
  QProcess p;
  p.setWorkingDirectory(cwd);
  p.start(MOECHAT_CLI, args);
  if (!p.waitForFinished(120000)) return {};
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -2,
          QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace

class TrainerCliTest : public QObject {
  Q_OBJECT
 private slots:
  void traceTrainEval() {
    QTemporaryDir dir;
    const QString d = dir.path();
    auto r = cli({"trace", "--demo-random", "-o", "t.moetrace", "--max-tokens", "4", "--limit", "40",
                  "--threads", "2"},
                 d);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.err.contains("40 prompts traced"));
    r = cli({"trace", "--demo-random", "-o", "t.moetrace", "--max-tokens", "4", "--limit", "50", "--threads",
             "2"},
            d);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.err.contains("10 prompts traced (40 skipped as done)"), qPrintable(r.err));  // resumed

    r = cli({"train", "t.moetrace", "--hidden", "32", "--epochs", "10", "--threads", "2", "-o", "p.moepred"},
            d);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("2 layer predictors"));  // the demo's 4 layers: 0 -> 2, 1 -> 3

    r = cli({"eval-predictor", "t.moetrace", "p.moepred"}, d);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY(r.out.contains("overall"));
    QVERIFY(r.out.contains("skip-gate"));

    r = cli({"eval-predictor", "t.moetrace", "p.moepred", "--json"}, d);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QJsonParseError err;
    const auto doc = QJsonDocument::fromJson(r.out.toUtf8(), &err);
    QVERIFY2(err.error == QJsonParseError::NoError, qPrintable(r.out));
    const auto o = doc.object();
    QCOMPARE(o["distance"].toInt(), 2);
    QCOMPARE(o["layers"].toArray().size(), 2);
    const auto acc = o["overall"].toObject()["accuracy"].toObject();
    for (const char* k : {"learned", "skip_gate", "token_based", "previous_token", "popularity", "random"})
      QVERIFY2(acc[k].isDouble() && acc[k].toDouble() >= 0 && acc[k].toDouble() <= 1, k);
    QVERIFY(acc["learned"].toDouble() > acc["random"].toDouble());

    // bench: a proactive-learned row beside the others; every row generates the same tokens.
    r = cli({"bench", "--demo-random", "--predictor", "p.moepred", "--policies", "reactive-lru,proactive",
             "--virtual-link", "--prompt-tokens", "8", "--decode-tokens", "4", "--threads", "2", "--json"},
            d);
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto bench = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QVERIFY(bench["identical_tokens"].toBool());
    const auto rows = bench["policies"].toArray();
    QCOMPARE(rows.size(), 3);
    QCOMPARE(rows[2].toObject()["policy"].toString(), QString("proactive-learned"));
    QVERIFY(rows[2].toObject()["expert_uses"].toInt() > 0);

    // generate --predictor: the learned set steers prefetching, never the text.
    const QStringList gen{
        "generate",  "--demo-random", "-n",  "16",     "--temp", "0", "--threads", "2", "--policy",
        "proactive", "--cache-share", "0.5", "--stats"};
    const auto plain = cli(gen, d);
    const auto learned = cli(gen + QStringList{"--predictor", "p.moepred"}, d);
    QVERIFY2(plain.code == 0 && learned.code == 0, qPrintable(learned.err));
    QVERIFY2(plain.err.contains("predictor skip-gate:"), qPrintable(plain.err));
    QVERIFY2(learned.err.contains("predictor learned:"), qPrintable(learned.err));
    QCOMPARE(learned.out, plain.out);
    r = cli({"generate", "--demo-random", "-n", "4", "--predictor", "p.moepred"}, d);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("--predictor needs --policy proactive"), qPrintable(r.err));
  }

  void wholePipelineOnTheDemo() {
    QTemporaryDir dir;
    const auto r = cli({"eval-predictor", "--demo", "--json", "--threads", "2"}, dir.path());
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto o = QJsonDocument::fromJson(r.out.toUtf8()).object();
    QVERIFY(o["overall"].toObject()["tokens"].toInt() > 100);
    QVERIFY(o.contains("not_beaten"));
  }

  void badInput() {
    QTemporaryDir dir;
    const QString d = dir.path();
    auto r = cli({"train", "missing.moetrace", "-o", "p"}, d);
    QCOMPARE(r.code, 1);
    QVERIFY(r.err.contains("cannot read"));
    QFile junk(d + "/junk");
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write("no trace here");
    junk.close();
    r = cli({"train", "junk", "-o", "p"}, d);
    QCOMPARE(r.code, 1);
    QVERIFY(r.err.contains("not a moechat trace"));
    r = cli({"train", "junk"}, d);
    QCOMPARE(r.code, 2);  // usage: no -o
    r = cli({"trace", "--demo-random", "--prompts", "nowhere.txt"}, d);
    QCOMPARE(r.code, 1);
    QVERIFY(r.err.contains("nowhere.txt"));
    r = cli({"eval-predictor", "junk", "junk"}, d);
    QCOMPARE(r.code, 1);
  }
};

QTEST_APPLESS_MAIN(TrainerCliTest)
#include "test_trainer_cli.moc"
