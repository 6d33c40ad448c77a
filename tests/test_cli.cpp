// moechat-cli as a user runs it: the demo streams and reports tokens/s; bad
// input of every kind gets a clear message and a non-zero exit, never a crash.
#include <cmath>
#include <csignal>

#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>

#include "models/gguf.h"
#include "support/engine_fixture.h"
#include "synth/synthetic_model.h"

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

// MOECHAT_TESTS_PATHS_ONCE=1 (CI's ASan stage): each code path once, not each
// combination (tests/support/gpu_suite.h says the same for the GoogleTest suites).
bool pathsOnce() {
  return !qEnvironmentVariableIsEmpty("MOECHAT_TESTS_PATHS_ONCE") &&
         qEnvironmentVariable("MOECHAT_TESTS_PATHS_ONCE") != "0";
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
    const auto r = runCli({"generate", "--demo-random", "-n", "64", "--temp", "0"});
    QCOMPARE(r.status, QProcess::NormalExit);
    QCOMPARE(r.code, 0);
    QVERIFY(r.err.contains("random weights"));
    QVERIFY2(r.err.contains("decode:  64 tokens generated; 63 decode steps"), qPrintable(r.err));
    QVERIFY(r.err.contains("tok/s"));
    QVERIFY(r.out.startsWith("Once upon a time"));
    QVERIFY(r.out.size() > QString("Once upon a time").size());
  }

  void infoDemoShowsFit() {
    const auto r = runCli({"info", "--demo-random", "--vram", "0.5"});
    QCOMPARE(r.code, 0);
    QVERIFY(r.out.contains("architecture:    llama"));
    QVERIFY(r.out.contains("expert cache:"));
  }

  void logitsOneLinePerPosition() {
    const auto r = runCli({"logits", "--demo-random", "--tokens", "1,5,9"});
    QCOMPARE(r.code, 0);
    const auto lines = r.out.trimmed().split('\n');
    QCOMPARE(lines.size(), 3);
    for (const auto& l : lines) QVERIFY(l.split(' ').size() > 100);
  }

  // --kv f16 keeps the CPU's KV cache in halves: the logits move by the rounding of
  // K and V (so the option took effect) and by no more than that.
  void kvF16StaysCloseToF32() {
    auto logits = [](const char* kv) {
      const auto r = runCli({"logits", "--demo-random", "--tokens", "1,5,9,2,7,3", "--kv", kv});
      std::vector<double> v;
      if (r.code != 0) return v;
      for (const auto& x : r.out.split(QRegularExpression("\\s+"), Qt::SkipEmptyParts))
        v.push_back(x.toDouble());
      return v;
    };
    const auto f32 = logits("f32"), f16 = logits("f16");
    QVERIFY(!f32.empty());
    QCOMPARE(f16.size(), f32.size());
    double diff = 0, scale = 0;
    for (size_t i = 0; i < f32.size(); ++i) {
      diff = std::max(diff, std::abs(f16[i] - f32[i]));
      scale = std::max(scale, std::abs(f32[i]));
    }
    QVERIFY2(diff > 0, "--kv f16 changed nothing");
    QVERIFY2(diff < 1e-2 * scale, qPrintable(QString("largest difference %1 of %2").arg(diff).arg(scale)));
    expectFailure(runCli({"logits", "--demo-random", "--tokens", "1", "--kv", "f8"}), 2,
                  "--kv must be f32 or f16");
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
    const QStringList names = {"resident", "reactive-lru", "static", "proactive", "cpu-experts"};
    const auto table = runCli({"bench", "--demo-random", "--decode-tokens", "8"});
    QCOMPARE(table.code, 0);
    for (const QString& policy : names) QVERIFY2(table.out.contains(policy), qPrintable(table.out));
    QVERIFY(table.out.contains("all policies generated identical tokens"));
    QVERIFY(table.out.contains("gain over plain LRU"));
    QVERIFY(table.out.contains("bound:"));
    QVERIFY(table.err.contains("link: simulated"));
    const auto json = runCli({"bench", "--demo-random", "--decode-tokens", "8", "--json"});
    QCOMPARE(json.code, 0);
    const auto doc = QJsonDocument::fromJson(json.out.toUtf8());
    QVERIFY2(doc.isObject(), qPrintable(json.out));
    const auto policies = doc.object()["policies"].toArray();
    QCOMPARE(policies.size(), names.size());
    for (int i = 0; i < names.size(); ++i) {
      const auto p = policies[i].toObject();
      QCOMPARE(p["policy"].toString(), names[i]);
      for (const char* key : {"ttft_s", "prefill_tok_s", "decode_tok_s", "gb_moved", "blocked_s", "goodpred",
                              "x_bound", "decode_vs_reactive"})
        QVERIFY2(p.contains(key), key);
      if (names[i] == "resident") continue;
      QCOMPARE(p["ready_hits"].toDouble() + p["inflight_hits"].toDouble() + p["misses"].toDouble(),
               p["expert_uses"].toDouble());
      if (p["cpu_computed"].toDouble() == 0)  // only the CPU rule may keep an expert off the link
        QVERIFY(p["bytes_h2d"].toDouble() >=
                doc.object()["bound_bytes"].toDouble());  // nothing beats the bound
    }
    QCOMPARE(policies[1].toObject()["decode_vs_reactive"].toDouble(), 1.0);
  }

  void benchKernels() {
    // Behaviour only: the JSON names the machine, the measured bandwidth and one entry
    // per requested type with positive rates; the instruction set can be chosen.
    const auto r = runCli({"bench", "--kernels", "--set-mb", "4", "--bw-mb", "16", "--rows", "64", "--batch",
                           "3", "--types", "Q8_0,Q4_K", "--isa", "portable", "--threads", "2", "--json"});
    QCOMPARE(r.code, 0);
    const auto doc = QJsonDocument::fromJson(r.out.toUtf8());
    QVERIFY2(doc.isObject(), qPrintable(r.out));
    QVERIFY2(doc.object()["machine"].toString().contains("portable"), qPrintable(r.out));
    QVERIFY(doc.object()["read_gbs"].toDouble() > 0);
    const auto kernels = doc.object()["kernels"].toArray();
    QCOMPARE(kernels.size(), 2);
    QCOMPARE(kernels[0].toObject()["type"].toString(), QString("Q8_0"));
    QCOMPARE(kernels[1].toObject()["type"].toString(), QString("Q4_K"));
    for (const auto& k : kernels)
      for (const char* key : {"decode_gbs", "f32_activation_decode_gbs", "prefill_gmacs"})
        QVERIFY2(k.toObject()[key].toDouble() > 0, key);
    const auto bad = runCli({"bench", "--kernels", "--isa", "sse9"});
    QCOMPARE(bad.code, 2);
    QVERIFY(bad.err.contains("--isa"));
    QCOMPARE(runCli({"bench", "--kernels", "--types", "TQ1_0"}).code, 2);
  }

  void benchAblationOneCommand() {
    const auto r = runCli({"bench", "--demo-random", "--decode-tokens", "4", "--json", "--ablate",
                           "--policies", "reactive-lru,proactive"});
    QCOMPARE(r.code, 0);
    const auto policies = QJsonDocument::fromJson(r.out.toUtf8()).object()["policies"].toArray();
    QStringList got;
    for (const auto& p : policies) got << p.toObject()["policy"].toString();
    QCOMPARE(got, QStringList({"reactive-lru", "proactive", "proactive-no-prefetch", "proactive-no-chunking",
                               "proactive-no-preemption", "proactive-no-reordering",
                               "proactive-no-cpu-fallback", "proactive-no-streaming"}));
    QCOMPARE(policies[2].toObject()["switches"].toObject()["prefetch"].toBool(), false);
    QCOMPARE(policies[2].toObject()["prefetch_hits"].toDouble(), 0.0);
    // A switch on the command line applies to proactive; the ablation skips what is already off.
    const auto off = runCli({"bench", "--demo-random", "--decode-tokens", "4", "--json", "--ablate",
                             "--no-chunking", "--policies", "proactive"});
    QCOMPARE(off.code, 0);
    const auto rows = QJsonDocument::fromJson(off.out.toUtf8()).object()["policies"].toArray();
    QCOMPARE(rows.size(), 6);
    QCOMPARE(rows[0].toObject()["switches"].toObject()["chunking"].toBool(), false);
  }

  void benchPresetGeneratesOnceThenReuses() {
    const QString cache = dir_.filePath("model-cache");
    const QStringList args = {"bench",       "--preset",   "tiny-qwen3moe",   "--quant", "q8_0",
                              "--cache-dir", cache,        "--decode-tokens", "4",       "--prompt-tokens",
                              "8",           "--policies", "reactive-lru"};
    const auto first = runCli(args);
    QCOMPARE(first.code, 0);
    QVERIFY2(first.err.contains("generating"), qPrintable(first.err));
    QVERIFY(QFile::exists(cache + "/tiny-qwen3moe-q8_0.gguf"));
    const auto second = runCli(args);
    QCOMPARE(second.code, 0);
    QVERIFY2(second.err.contains("reusing"), qPrintable(second.err));
    expectFailure(runCli({"bench", "--preset", "DS-9", "--cache-dir", cache}), 2, "unknown --preset 'DS-9'");
    expectFailure(runCli({"bench", "--preset", "DS-1", "--quant", "q2", "--cache-dir", cache}), 2,
                  "--quant: unknown weight type 'q2'");
    expectFailure(runCli({"bench", "--demo-random", "--quant", "f16"}), 2, "--quant goes with --preset");
  }

  void generateWithPolicyPrintsCounters() {
    for (const char* policy : {"static", "proactive", "cpu-experts"}) {
      const auto r = runCli({"generate", "--demo-random", "-n", "12", "--temp", "0", "--policy", policy,
                             "--cache-share", "0.4", "--link-gbps", "10", "--stats", "--verbose"});
      QCOMPARE(r.code, 0);
      QVERIFY2(r.err.contains(QString("offload: policy ") + policy), qPrintable(r.err));
      QVERIFY(r.err.contains("expert uses"));
      QVERIFY(r.err.contains("decode 11 tokens"));
      if (QString(policy) != "static") QVERIFY2(r.err.contains("cpu-experts: layer"), qPrintable(r.err));
    }
    // Same text whatever the policy (greedy).
    const auto a = runCli({"generate", "--demo-random", "-n", "16", "--temp", "0"});
    const auto b = runCli({"generate", "--demo-random", "-n", "16", "--temp", "0", "--policy", "static",
                           "--cache-share", "0.25"});
    QCOMPARE(a.out, b.out);
    expectFailure(runCli({"generate", "--demo-random", "--policy", "lfu"}), 2, "unknown policy 'lfu'");
    expectFailure(runCli({"generate", "--demo-random", "--cache-share", "1.5"}), 2, "--cache-share");
    expectFailure(runCli({"generate", "--demo-random", "--policy", "static", "--cache-mb", "0.000001"}), 1,
                  "fewer than 2 experts");
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

  void genModelKQuantThenGenerate() {
    // A tiny spec widened to rows of 256 for Q4_K experts; generate runs it greedily,
    // twice with the same tokens.
    const QString path = dir_.filePath("q4k.gguf");
    const auto gen = runCli({"gen-model", "--arch", "llama", "--expert-type", "q4_k", "-o", path});
    QCOMPARE(gen.code, 0);
    QVERIFY2(gen.err.contains("n_embd 256"), qPrintable(gen.err));
    const auto info = runCli({"info", path});
    QCOMPARE(info.code, 0);
    QVERIFY2(info.out.contains("Q4_K"), qPrintable(info.out));
    const auto a = runCli({"generate", path, "-n", "8", "--temp", "0", "-p", "hello"});
    QCOMPARE(a.code, 0);
    QVERIFY2(a.err.contains("8 tokens generated"), qPrintable(a.err));
    const auto b = runCli({"generate", path, "-n", "8", "--temp", "0", "-p", "hello"});
    QCOMPARE(b.out, a.out);
    expectFailure(runCli({"gen-model", "--arch", "llama", "--expert-type", "tq1_0", "-o", path}), 2,
                  "unknown weight type 'tq1_0'");
  }

  void infoDescribesAFullSizePresetWithoutItsWeights() {
    // Published totals (model cards): GLM-4.5-Air 106B / 12B active; gpt-oss-20b 21B /
    // 3.6B; gpt-oss-120b 117B / 5.1B. GLM-4.5-Air's counts are derived below from its
    // config.json, not from the program; the input embedding (a lookup) is not active.
    const auto r = runCli({"info", "--preset", "GLM-Air"});
    QCOMPARE(r.code, 0);
    for (const char* want :
         {"architecture:    glm4moe", "46 (45 MoE, 1 dense) + 1 next-token-prediction layer",
          "128 per layer, 8 used per token, ffn 1408", "expert types:    Q8_0", "one expert:      18.38 MB"})
      QVERIFY2(r.out.contains(want), qPrintable(want + ("\n" + r.out)));
    {
      // GLM-4.5-Air's config.json: hidden_size 4096, num_hidden_layers 46 (first_k_dense_replace
      // 1, intermediate_size 10944), n_routed_experts 128, num_experts_per_tok 8,
      // moe_intermediate_size 1408, n_shared_experts 1, num_attention_heads 96,
      // num_key_value_heads 8, head_dim 128, attention_bias true, vocab_size 151552, untied
      // embeddings, num_nextn_predict_layers 1 (its own layer plus eh_proj 2h -> h and three norms).
      const double h = 4096, q = 96 * 128, kv = 8 * 128, vocab = 151552, ffe = 1408;
      const double attn = h * q + 2 * h * kv + q * h + (q + 2 * kv), norms = 2 * h;
      const double expert = 3 * h * ffe, router = 128 * h + 128;  // weights and selection bias
      const double dense = attn + norms + 3 * h * 10944;
      const double moe_all = attn + norms + router + 128 * expert + expert;  // + the shared expert
      const double moe_active = attn + norms + router + 8 * expert + expert;
      const double embed = vocab * h, output = vocab * h;
      const double run = dense + 45 * moe_all + embed + output + h;  // + the output norm
      const double active = dense + 45 * moe_active + output + h;
      const double nextn = moe_all + 2 * h * h + 3 * h;
      const QRegularExpression counts(
          "parameters: +([0-9.]+)B in the file, ([0-9.]+)B in the layers run, "
          "([0-9.]+)B active per token");
      const auto m = counts.match(r.out);
      QVERIFY2(m.hasMatch(), qPrintable(r.out));
      for (const auto& [printed, derived] :
           {std::pair{m.captured(1), run + nextn}, {m.captured(2), run}, {m.captured(3), active}})
        QVERIFY2(std::abs(printed.toDouble() - derived / 1e9) < 0.006,
                 qPrintable(printed + "B printed, " + QString::number(derived / 1e9, 'f', 3) + "B derived"));
    }
    expectFailure(runCli({"info", "--preset", "GLM-Air", "--quant", "q4_k"}), 2, "not whole q4_k blocks");
    for (auto [preset, want] :
         {std::pair{"OSS-20B", "20.91B in the file, 20.91B in the layers run, 3.61B active"},
          std::pair{"OSS-120B", "116.83B in the file, 116.83B in the layers run, 5.13B active"}}) {
      const auto oss = runCli({"info", "--preset", preset, "--quant", "mxfp4"});
      QVERIFY2(oss.code == 0 && oss.out.contains(want) && oss.out.contains("architecture:    gpt-oss"),
               qPrintable(oss.out + oss.err));
    }
    // DeepSeek-V2-Lite's card: 15.7B total, 2.4B active.
    const auto ds2 = runCli({"info", "--preset", "DS-2"});
    for (const char* want :
         {"architecture:    deepseek2", "15.71B in the file, 15.71B in the layers run, 2.45B active",
          "cached latent 512 + rope 64", "YaRN x40 over 4096 positions"})
      QVERIFY2(ds2.code == 0 && ds2.out.contains(want), qPrintable(want + ("\n" + ds2.out + ds2.err)));
  }

  void genModelInEachAddedTypeThenGenerate_data() {
    QTest::addColumn<QString>("arch");
    QTest::addColumn<int>("index");
    int index = 0;
    for (const char* arch : {"qwen3moe", "glm4moe", "deepseek2", "gpt-oss"})
      QTest::newRow(arch) << arch << index++;
  }
  void genModelInEachAddedTypeThenGenerate() {
    // The types of K-quant mixes and gpt-oss, as experts and as the other matrices,
    // in the architectures added with them: generate, and one turn of chat.
    // MOECHAT_TESTS_PATHS_ONCE (CI's ASan stage): each type once, the architectures in turn.
    QFETCH(QString, arch);
    QFETCH(int, index);
    const char* const types[] = {"q4_1", "q5_0", "q5_1", "iq4_nl", "mxfp4", "q2_k", "q3_k", "iq4_xs"};
    for (int t = 0; t < 8; ++t) {
      if (pathsOnce() && t % 4 != index) continue;
      const char* type = types[t];
      const QString what = arch + " " + type;
      const QString path = dir_.filePath(QString("%1-%2.gguf").arg(arch, type));
      const auto gen =
          runCli({"gen-model", "--arch", arch, "--expert-type", type, "--weight-type", type, "-o", path});
      QVERIFY2(gen.code == 0, qPrintable(what + ": " + gen.err));
      const auto info = runCli({"info", path});
      QVERIFY2(info.out.contains(QString(type).toUpper()) && info.out.contains("architecture:    " + arch),
               qPrintable(info.out));
      const auto r = runCli({"generate", path, "-n", "4", "--temp", "0", "-p", "hello"});
      QVERIFY2(r.code == 0 && r.err.contains("4 tokens generated"), qPrintable(what + ": " + r.err));
      const auto chat = runCli({"chat", path, "-n", "4", "--temp", "0"}, "hello\n/exit\n");
      QVERIFY2(chat.code == 0 && chat.err.contains("decode:"), qPrintable(what + ": " + chat.err));
    }
  }

  void genModelInEachGridTypeThenChat_data() {
    QTest::addColumn<QString>("arch");
    QTest::addColumn<QString>("type");
    // MOECHAT_TESTS_PATHS_ONCE (CI's ASan stage): each type once, the architectures in turn.
    const bool paths_once = pathsOnce();
    // qwen3moe's grid types: lowBitMixIsDescribedAndRuns.
    const char* const archs[] = {"qwen35moe", "minimax-m2", "gemma4"};
    const char* const types[] = {"iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s"};
    for (int a = 0; a < 3; ++a)
      for (int t = 0; t < 7; ++t)
        if (!paths_once || t % 3 == a)
          QTest::newRow(qPrintable(QString("%1 %2").arg(archs[a], types[t])))
              << QString(archs[a]) << QString(types[t]);
  }
  void genModelInEachGridTypeThenChat() {
    // The grid-coded IQ types of the low-bit files as experts (4 per layer, the
    // quantiser's search is slow under the sanitizers): info names the type, and one
    // turn of chat runs.
    QFETCH(QString, arch);
    QFETCH(QString, type);
    const QString what = arch + " " + type;
    const QString path = dir_.filePath(QString("%1-%2.gguf").arg(arch, type));
    const auto gen = runCli({"gen-model", "--arch", arch, "--expert-type", type, "--weight-type", "q8_0",
                             "--experts", "4", "-o", path});
    QVERIFY2(gen.code == 0, qPrintable(what + ": " + gen.err));
    const auto info = runCli({"info", path});
    QVERIFY2(info.out.contains("expert types:    " + type.toUpper()), qPrintable(info.out));
    const auto chat = runCli({"chat", path, "-n", "4", "--temp", "0"}, "hello\n/exit\n");
    QVERIFY2(chat.code == 0 && chat.err.contains("decode:"), qPrintable(what + ": " + chat.err));
  }

  void lowBitMixIsDescribedAndRuns() {
    // A low-bit mix as the "UD" files have it: gate and up a grid type, down a step
    // above, the other matrices a K-quant; info names each type's projections.
    const QString mix = dir_.filePath("qwen3moe-ud-mix.gguf");
    const auto gen = runCli({"gen-model", "--arch", "qwen3moe", "--expert-type", "iq2_xxs", "--down-type",
                             "iq3_s", "--weight-type", "q4_k", "-o", mix});
    QVERIFY2(gen.code == 0, qPrintable(gen.err));
    const auto info = runCli({"info", mix});
    QVERIFY2(info.out.contains("expert types:    IQ2_XXS (gate, up), IQ3_S (down)"), qPrintable(info.out));
    // Random weights may pick the end token at once: the run, not its length, is checked.
    const auto r = runCli({"generate", mix, "-n", "4", "--temp", "0", "-p", "hello"});
    QVERIFY2(r.code == 0 && r.err.contains("tokens generated"), qPrintable(r.err));
  }

  void uncomputedTypeFileIsDescribedButNotRun() {
    const QString path = writeFile("i16-experts.gguf", tinyModelWithUncomputedExperts());
    const auto info = runCli({"info", path});
    QCOMPARE(info.code, 0);
    QVERIFY2(info.out.contains("I16"), qPrintable(info.out));
    expectFailure(runCli({"generate", path, "-n", "4"}), 1, "I16, which moechat cannot compute yet");
  }

  void cudaBackendIsRefusedWithAReasonWhereItCannotRun() {
    // Here (no GPU, or a build without CUDA) the reason is named; on a GPU the offload
    // policies are refused on the CUDA backend, which runs only `resident` so far.
    const auto r =
        runCli({"generate", "--demo-random", "-n", "4", "--backend", "cuda", "--policy", "proactive"});
    QCOMPARE(r.code, 1);
    QVERIFY2(r.err.contains("CUDA") || r.err.contains("cuda"), qPrintable(r.err));
    const auto bad = runCli({"generate", "--demo-random", "--backend", "tpu"});
    QCOMPARE(bad.code, 2);
  }

  void emptyPrompt() { expectFailure(runCli({"generate", "--demo-random", "-p", ""}), 2, "empty prompt"); }

  void promptLongerThanContext() {
    const QString longp = QString("word ").repeated(400);
    expectFailure(runCli({"generate", "--demo-random", "--ctx", "64", "-p", longp}), 1, "context");
  }

  void usageErrors() {
    expectFailure(runCli({"generate", "--demo-random", "--bogus"}), 2, "unknown option --bogus");
    expectFailure(runCli({"generate"}), 2, "no model given");
    expectFailure(runCli({"frobnicate"}), 2, "unknown command");
    expectFailure(runCli({"logits", "--demo-random", "--tokens", "1,x"}), 2, "not a token id");
    expectFailure(runCli({"logits", "--demo-random", "--tokens", "999999"}), 1, "outside the vocabulary");
  }

  void writeErrorsAreFailures() {
    // /dev/full accepts the open and fails every write with ENOSPC.
    expectFailure(runCli({"logits", "--demo-random", "--tokens", "1,2", "--dump-hidden", "/dev/full"}), 1,
                  "cannot write /dev/full");
    QProcess p;
    p.setStandardOutputFile("/dev/full");
    p.start(QStringLiteral(MOECHAT_CLI), {"logits", "--demo-random", "--tokens", "1,2"});
    QVERIFY(p.waitForFinished(120000));
    QCOMPARE(p.exitCode(), 1);
    QVERIFY2(p.readAllStandardError().contains("cannot write standard output"), "stderr names the output");
  }

  void ctrlCAtTheChatPromptEndsTheChat() {
    // Ctrl-C stops a reply; once the reply is over, at the prompt, it must end the
    // program as usual rather than stay caught by the reply's handler.
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(QStringLiteral(MOECHAT_CLI), {"chat", "--demo-random", "-n", "4"});
    QVERIFY(p.waitForStarted());
    p.write("hello\n");
    QByteArray out;
    while (!out.contains("decode:") && p.waitForReadyRead(60000)) out += p.readAll();
    QVERIFY2(out.contains("decode:"), out.constData());
    ::kill(pid_t(p.processId()), SIGINT);
    QVERIFY2(p.waitForFinished(60000), "SIGINT at the prompt was ignored");
    QCOMPARE(p.exitStatus(), QProcess::CrashExit);  // ended by the signal, as a shell expects
  }

  void ctrlCEndsAWaitOnAPacedLink() {
    // A 2 KB/s simulated link: the prompt's queued copies need minutes of link time
    // (the stats' link clock). Ctrl-C while the prefill waits for a copy must end the
    // reply then, not after the copies' pacing: the copy thread was busy for a small
    // part of that link time. A signal that landed before the first wait (the stats
    // count no host wait: a slow start) is sent again, later, in a fresh run.
    const QRegularExpression stats(
        "copy busy ([0-9.]+) s, link clock ([0-9.]+) s\\s+compute blocked [0-9.]+ s: "
        "([0-9]+) host waits");
    for (int delay_ms = 250;; delay_ms *= 2) {
      QProcess p;
      p.setProcessChannelMode(QProcess::MergedChannels);
      p.start(QStringLiteral(MOECHAT_CLI), {"generate", "--demo-random", "--policy", "reactive-lru",
                                            "--link-gbps", "0.000002", "--paced", "-n", "20", "--stats"});
      QVERIFY(p.waitForStarted());
      QByteArray out;
      while (!out.contains("Once upon a time") && p.waitForReadyRead(60000)) out += p.readAll();
      QVERIFY2(out.contains("Once upon a time"), out.constData());
      QTest::qWait(delay_ms);  // orders the signal after the prefill began; the stats say whether it did
      ::kill(pid_t(p.processId()), SIGINT);
      QVERIFY2(p.waitForFinished(300000), "SIGINT was not honoured during paced copies");  // a hang's bound
      out += p.readAll();
      QCOMPARE(p.exitCode(), 130);
      QVERIFY2(out.contains("stopped: cancelled"), out.constData());
      const auto m = stats.match(QString::fromUtf8(out));
      QVERIFY2(m.hasMatch(), out.constData());
      const double copy_busy = m.captured(1).toDouble(), link_clock = m.captured(2).toDouble();
      if (m.captured(3).toInt() == 0) {
        QVERIFY2(delay_ms < 32000, "the signal never landed while the prefill waited for a copy");
        continue;
      }
      QVERIFY2(link_clock > 10.0, out.constData());  // at least one expert's copy was queued
      QVERIFY2(copy_busy < link_clock / 4, out.constData());
      return;
    }
  }

  void everySubcommandAnswersHelp() {
    const QStringList commands = {"info",  "generate", "chat",      "logits",        "bench",
                                  "trace", "train",    "gen-model", "eval-predictor"};
    for (const QString& c : commands) {
      for (const QStringList& args :
           {QStringList{c, "--help"}, QStringList{c, "-h"}, QStringList{c, "--demo-random", "--help"}}) {
        const auto r = runCli(args);
        QCOMPARE(r.status, QProcess::NormalExit);
        QVERIFY2(r.code == 0,
                 qPrintable(args.join(' ') + ": exit " + QString::number(r.code) + ", " + r.err));
        QVERIFY2(r.out.startsWith("usage: moechat-cli " + c), qPrintable(args.join(' ') + ": " + r.out));
        QVERIFY2(r.out.contains("  " + c + " "), qPrintable(args.join(' ') + ": " + r.out));
      }
    }
    // Only that command: gen-model's help is not the whole list.
    const auto gen = runCli({"gen-model", "--help"});
    QVERIFY(gen.out.contains("--arch"));
    QVERIFY(!gen.out.contains("eval-predictor"));
    const auto bench = runCli({"bench", "--help"});
    QVERIFY(bench.out.contains("--kernels"));
  }

  void genModelNamesTheValidChoices() {
    const QString path = dir_.filePath("never.gguf");
    const auto arch = runCli({"gen-model", "--arch", "x", "-o", path});
    expectFailure(arch, 2, "unknown architecture 'x'");
    for (const char* a : {"llama", "qwen2moe", "qwen3moe", "deepseek", "olmoe"})
      QVERIFY2(arch.err.contains(a), qPrintable(arch.err));
    QVERIFY2(!arch.err.contains("tinySpec"), qPrintable(arch.err));
    const auto preset = runCli({"gen-model", "--preset", "nope", "-o", path});
    expectFailure(preset, 2, "unknown preset 'nope'");
    QVERIFY2(preset.err.contains("OLMoE") && !preset.err.contains("presetSpec"), qPrintable(preset.err));
    QVERIFY(!QFile::exists(path));
  }

  void numbersMustBeFiniteAndInRange() {
    // nan compares false with every bound, and inf or 1e308 scaled to bytes is an
    // undefined conversion to an integer: each is a usage error naming the option.
    expectFailure(runCli({"info", "--demo-random", "--vram", "nan"}), 2, "--vram needs a finite number");
    expectFailure(runCli({"info", "--demo-random", "--vram", "inf"}), 2, "--vram needs a finite number");
    expectFailure(runCli({"info", "--demo-random", "--vram", "1e308"}), 2, "--vram needs a finite number");
    expectFailure(runCli({"info", "--demo-random", "--vram", "1e9"}), 2, "--vram must be in (0, 1e6]");
    expectFailure(runCli({"generate", "--demo-random", "--cache-mb", "nan"}), 2,
                  "--cache-mb needs a finite number");
    expectFailure(runCli({"generate", "--demo-random", "--cache-mb", "inf"}), 2,
                  "--cache-mb needs a finite number");
    expectFailure(runCli({"generate", "--demo-random", "--link-gbps", "nan"}), 2,
                  "--link-gbps needs a finite number");
    expectFailure(runCli({"generate", "--demo-random", "--temp", "-nan"}), 2, "--temp needs a finite number");
  }
};

QTEST_GUILESS_MAIN(CliTest)
#include "test_cli.moc"
