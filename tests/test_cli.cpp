// moechat-cli as a user runs it: the demo streams and reports tokens/s; bad
// input of every kind gets a clear message and a non-zero exit, never a crash.
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>

#include "engine_fixture.h"
#include "models/gguf.h"
#include "models/synthetic_model.h"

namespace {

struct Result {
  int code = -1;
  QProcess::ExitStatus status = QProcess::CrashExit;
  QString out, err;
};

Result runCli(const QStringList& args, const QByteArray& stdin_data = {}) {
  QProcess p;
  p.start(MOECHAT_CLI, args);
  if (!p.waitForStarted()) return {};
  if (!stdin_data.isEmpty()) p.write(stdin_data);
  p.closeWriteChannel();
  p.waitForFinished(300000);
  return {p.exitCode(), p.exitStatus(), QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

void expectFailure(const Result& r, int code, const QString& message) {
  QCOMPARE(r.status, QProcess::NormalExit);  // never a crash
  QCOMPARE(r.code, code);
  QVERIFY2(r.err.contains(message), qPrintable("stderr was: " + r.err));
}

}  // namespace

class CliTest : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;

  QString writeFile(const QString& name, const std::vector<uint8_t>& bytes) {
    const QString path = dir_.filePath(name);
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) qFatal("cannot write %s", qPrintable(path));
    f.write(reinterpret_cast<const char*>(bytes.data()), qint64(bytes.size()));
    return path;
  }

 private slots:
  void generateDemoStreams64Tokens() {
    const auto r = runCli({"generate", "--demo", "-n", "64", "--temp", "0"});
    QCOMPARE(r.status, QProcess::NormalExit);
    QCOMPARE(r.code, 0);
    QVERIFY(r.err.contains("random weights"));
    QVERIFY2(r.err.contains("decode:  64 tokens generated; 63 decode steps"), qPrintable(r.err));
    QVERIFY(r.err.contains("tok/s"));
    QVERIFY(r.out.startsWith("Once upon a time"));
    QVERIFY(r.out.size() > QString("Once upon a time").size());
  }

  void infoDemoShowsFit() {
    const auto r = runCli({"info", "--demo", "--vram", "0.5"});
    QCOMPARE(r.code, 0);
    QVERIFY(r.out.contains("architecture:    llama"));
    QVERIFY(r.out.contains("expert cache:"));
  }

  void logitsOneLinePerPosition() {
    const auto r = runCli({"logits", "--demo", "--tokens", "1,5,9"});
    QCOMPARE(r.code, 0);
    const auto lines = r.out.trimmed().split('\n');
    QCOMPARE(lines.size(), 3);
    for (const auto& l : lines) QVERIFY(l.split(' ').size() > 100);
  }

  void genModelThenInfoAndChat() {
    const QString path = dir_.filePath("q3.gguf");
    QCOMPARE(runCli({"gen-model", "--arch", "qwen3moe", "-o", path}).code, 0);
    const auto info = runCli({"info", path});
    QCOMPARE(info.code, 0);
    QVERIFY(info.out.contains("qwen3moe"));
    const auto chat = runCli({"chat", path, "-n", "8", "--temp", "0"}, "hello\n/exit\n");
    QCOMPARE(chat.code, 0);
    QVERIFY(chat.err.contains("ChatML") || chat.err.contains("chatml"));
    QVERIFY(chat.err.contains("decode:"));
  }

  void benchDemoTableAndJson() {
    const auto table = runCli({"bench", "--demo", "--decode-tokens", "8"});
    QCOMPARE(table.code, 0);
    for (const char* policy : {"resident", "reactive-lru", "proactive"}) QVERIFY(table.out.contains(policy));
    QVERIFY(table.out.contains("all policies generated identical tokens"));
    QVERIFY(table.err.contains("link: simulated"));
    const auto json = runCli({"bench", "--demo", "--decode-tokens", "8", "--json"});
    QCOMPARE(json.code, 0);
    const auto doc = QJsonDocument::fromJson(json.out.toUtf8());
    QVERIFY2(doc.isObject(), qPrintable(json.out));
    const auto policies = doc.object()["policies"].toArray();
    QCOMPARE(policies.size(), 3);
    QCOMPARE(policies[1].toObject()["policy"].toString(), QString("reactive-lru"));
    const auto reactive = policies[1].toObject();
    QCOMPARE(reactive["ready_hits"].toDouble() + reactive["inflight_hits"].toDouble() +
                 reactive["misses"].toDouble(),
             reactive["expert_uses"].toDouble());
    QVERIFY(reactive["bytes_h2d"].toDouble() >=
            doc.object()["bound_bytes"].toDouble());  // nothing beats the bound
  }

  void missingFile() { expectFailure(runCli({"info", dir_.filePath("nope.gguf")}), 1, "nope.gguf"); }

  void corruptFile() {
    auto bytes = moe::synth::demoModelBytes();
    bytes.resize(bytes.size() / 2);  // truncated download
    expectFailure(runCli({"generate", writeFile("half.gguf", bytes), "-n", "4"}), 1, "error:");
    expectFailure(runCli({"info", writeFile("junk.gguf", {'n', 'o', 't', ' ', 'g', 'g', 'u', 'f'})}), 1,
                  "error:");
  }

  void unsupportedArchitecture() {
    moe::gguf::GgufWriter w;
    w.setString("general.architecture", "mamba");
    expectFailure(runCli({"info", writeFile("mamba.gguf", w.toBytes())}), 1,
                  "unsupported architecture 'mamba'");
  }

  void kQuantFileIsDescribedButNotRun() {
    const QString path = writeFile("kquant.gguf", tinyModelWithKQuantExperts());
    const auto info = runCli({"info", path});
    QCOMPARE(info.code, 0);
    QVERIFY2(info.out.contains("Q4_K"), qPrintable(info.out));
    expectFailure(runCli({"generate", path, "-n", "4"}), 1, "Q4_K, which moechat cannot compute yet");
  }

  void emptyPrompt() { expectFailure(runCli({"generate", "--demo", "-p", ""}), 2, "empty prompt"); }

  void promptLongerThanContext() {
    const QString longp = QString("word ").repeated(400);
    expectFailure(runCli({"generate", "--demo", "--ctx", "64", "-p", longp}), 1, "context");
  }

  void usageErrors() {
    expectFailure(runCli({"generate", "--demo", "--bogus"}), 2, "unknown option --bogus");
    expectFailure(runCli({"generate"}), 2, "no model given");
    expectFailure(runCli({"frobnicate"}), 2, "unknown command");
    expectFailure(runCli({"logits", "--demo", "--tokens", "1,x"}), 2, "not a token id");
    expectFailure(runCli({"logits", "--demo", "--tokens", "999999"}), 1, "outside the vocabulary");
  }
};

QTEST_GUILESS_MAIN(CliTest)
#include "test_cli.moc"
