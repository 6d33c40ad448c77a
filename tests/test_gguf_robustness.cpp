// The GGUF reader against malformed and foreign input: hand-built files shaped like
// llama.cpp's, the corpus of tricky files (tests/data/gguf_corpus/MANIFEST.txt),
// truncation at every offset, byte flips, file errors, and a third-party parser's
// view of files we write (tools/interop, @huggingface/gguf).
#include "gguf_test_util.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inference/backend.h"
#include "inference/model.h"
#include "inference/transformer.h"
#include "offload/resident_expert_source.h"

class TestGgufRobustness : public QObject {
  Q_OBJECT
 private slots:
  void readsHandBuiltLlamaCppMoeFile();
  void corpusFilesGiveExpectedErrors();
  void truncationAtEveryOffsetThrows();
  void byteFlipsNeverCrash();
  void openReportsFileErrors();
  void interopWithHuggingfaceParser();
  void runsModelsWhoseHeaderAThirdPartyWrote();
};

void TestGgufRobustness::readsHandBuiltLlamaCppMoeFile() {
  // Shaped like a llama.cpp-converted Mixtral-style file: optional q/k/v biases, no
  // output.weight (tied to token_embd), old-style per-expert 2-D tensors.
  const uint64_t n_embd = 32, n_ff = 64, n_vocab = 4, n_expert = 2;
  struct T {
    std::string name;
    std::vector<uint64_t> dims;
    TensorType type;
  };
  std::vector<T> ts = {
      {"token_embd.weight", {n_embd, n_vocab}, TensorType::Q8_0},
      {"blk.0.attn_norm.weight", {n_embd}, TensorType::F32},
      {"blk.0.attn_q.weight", {n_embd, n_embd}, TensorType::F16},
      {"blk.0.attn_q.bias", {n_embd}, TensorType::F32},
      {"blk.0.attn_k.weight", {n_embd, n_embd}, TensorType::Q8_0},
      {"blk.0.attn_k.bias", {n_embd}, TensorType::F32},
      {"blk.0.attn_v.weight", {n_embd, n_embd}, TensorType::Q4_0},
      {"blk.0.attn_v.bias", {n_embd}, TensorType::F32},
      {"blk.0.attn_output.weight", {n_embd, n_embd}, TensorType::Q8_0},
      {"blk.0.ffn_norm.weight", {n_embd}, TensorType::F32},
      {"blk.0.ffn_gate_inp.weight", {n_embd, n_expert}, TensorType::F32},
  };
  for (uint64_t e = 0; e < n_expert; ++e) {
    const std::string E = std::to_string(e);
    ts.push_back({"blk.0.ffn_gate." + E + ".weight", {n_embd, n_ff}, TensorType::Q8_0});
    ts.push_back({"blk.0.ffn_down." + E + ".weight", {n_ff, n_embd}, TensorType::Q8_0});
    ts.push_back({"blk.0.ffn_up." + E + ".weight", {n_embd, n_ff}, TensorType::Q8_0});
  }
  ts.push_back({"output_norm.weight", {n_embd}, TensorType::F32});

  Bytes b;
  b.put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(ts.size()).put<uint64_t>(9);
  b.str("general.architecture").put<uint32_t>(8).str("llama");
  b.str("general.name").put<uint32_t>(8).str("tiny mixtral");
  b.str("llama.block_count").put<uint32_t>(4).put<uint32_t>(1);
  b.str("llama.expert_count").put<uint32_t>(4).put<uint32_t>(n_expert);
  b.str("llama.expert_used_count").put<uint32_t>(4).put<uint32_t>(2);
  b.str("llama.attention.layer_norm_rms_epsilon").put<uint32_t>(6).put<float>(1e-5f);
  b.str("general.file_type").put<uint32_t>(4).put<uint32_t>(7);
  b.str("tokenizer.ggml.model").put<uint32_t>(8).str("llama");
  b.str("tokenizer.ggml.tokens").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(n_vocab);
  for (const char* tok : {"<unk>", "<s>", "</s>", "\xE2\x96\x81hi"}) b.str(tok);
  uint64_t offset = 0;
  std::vector<uint64_t> offsets;
  for (const T& t : ts) {
    uint64_t n = rowBytes(t.type, t.dims[0]);
    for (size_t i = 1; i < t.dims.size(); ++i) n *= t.dims[i];
    offsets.push_back(offset);
    b.str(t.name).put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) b.put<uint64_t>(d);
    b.put<uint32_t>(static_cast<uint32_t>(t.type)).put<uint64_t>(offset);
    offset = (offset + n + 31) / 32 * 32;
  }
  b.padTo(32);
  const size_t data_start = b.b.size();
  for (size_t i = 0; i < ts.size(); ++i) {
    b.b.resize(data_start + offsets[i], 0);
    const uint64_t n = (i + 1 < ts.size() ? offsets[i + 1] : offset) - offsets[i];
    b.b.insert(b.b.end(), n, static_cast<uint8_t>(i + 1));  // tensor i's bytes hold i + 1
  }

  const GgufFile f = GgufFile::fromBytes(b.b);
  QCOMPARE(f.tensors().size(), ts.size());
  QCOMPARE(f.dataOffset(), uint64_t{data_start});
  QVERIFY(f.findTensor("output.weight") == nullptr);
  QVERIFY(f.findTensor("blk.0.attn_q.bias") != nullptr);
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorInfo* t = f.findTensor(ts[i].name);
    QVERIFY2(t != nullptr, ts[i].name.c_str());
    QCOMPARE(t->dims, ts[i].dims);
    QCOMPARE(t->type, ts[i].type);
    QCOMPARE(t->offset, offsets[i]);
    const auto data = f.tensorData(*t);
    QCOMPARE(int(data.front()), int(i + 1));
    QCOMPARE(int(data.back()), int(i + 1));
  }
  QCOMPARE(f.findTensor("blk.0.ffn_gate.1.weight")->nbytes, uint64_t{34 * 64});
  QCOMPARE(*f.getUint("llama.expert_count"), n_expert);
  QCOMPARE(*f.getFloat("llama.attention.layer_norm_rms_epsilon"), double(1e-5f));
  const auto vocab = moe::VocabData::fromGguf(f);
  QCOMPARE(vocab.tokens.size(), size_t{n_vocab});
  QCOMPARE(vocab.bos_id, -1);  // absent keys stay -1
}

void TestGgufRobustness::corpusFilesGiveExpectedErrors() {
  const QString dir = QStringLiteral(MOECHAT_TEST_DATA "/gguf_corpus/");
  QFile manifest(dir + "MANIFEST.txt");
  QVERIFY(manifest.open(QIODevice::ReadOnly | QIODevice::Text));
  int checked = 0;
  while (!manifest.atEnd()) {
    const QString line = QString::fromUtf8(manifest.readLine()).trimmed();
    if (line.isEmpty() || line.startsWith('#')) continue;
    const QStringList cols = line.split('\t');
    QVERIFY2(cols.size() >= 2, qPrintable(line));
    const std::string path = (dir + cols[0]).toStdString();
    const std::string expect = cols[1].toStdString();
    std::optional<GgufFile> f;
    std::string error;
    try {
      f = GgufFile::open(path);
    } catch (const GgufError& e) {
      error = e.what();
    }
    const std::string what = cols[0].toStdString() + ": got \"" + error + "\"";
    if (expect == "ok") {
      QVERIFY2(f.has_value(), what.c_str());
    } else {
      QVERIFY2(!f && error.find(expect) != std::string::npos, (what + ", want \"" + expect + "\"").c_str());
    }
    if (f && cols.size() >= 3) {
      const std::string vexpect = cols[2].toStdString();
      std::string verr = "ok";
      try {
        (void)moe::VocabData::fromGguf(*f);
      } catch (const GgufError& e) {
        verr = e.what();
      }
      QVERIFY2(verr.find(vexpect) != std::string::npos,
               (cols[0].toStdString() + ": vocab got \"" + verr + "\", want \"" + vexpect + "\"").c_str());
    }
    ++checked;
  }
  QVERIFY(checked >= 40);
}

void TestGgufRobustness::truncationAtEveryOffsetThrows() {
  const auto full = smallModelWriter().toBytes();
  const GgufFile whole = GgufFile::fromBytes(full);
  const TensorInfo& last = whole.tensors().back();
  const uint64_t needed = whole.dataOffset() + last.offset + last.nbytes;
  for (size_t len = 0; len < full.size(); ++len) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + len);
    try {
      const GgufFile f = GgufFile::fromBytes(std::move(prefix));
      // Only the trailing padding after the last tensor is optional.
      QVERIFY2(len >= needed, qPrintable(QString("prefix of %1 bytes opened").arg(len)));
    } catch (const GgufError&) {
      QVERIFY2(len < needed, qPrintable(QString("prefix of %1 bytes rejected").arg(len)));
    }
  }
}

void TestGgufRobustness::byteFlipsNeverCrash() {
  // Any exception other than GgufError (bad_alloc, length_error) fails the test; ASan
  // builds catch out-of-bounds reads.
  const auto full = smallModelWriter().toBytes();
  int opened = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    for (uint8_t mask : {uint8_t{0xff}, uint8_t{0x80}, uint8_t{0x01}}) {
      auto bytes = full;
      bytes[i] ^= mask;
      try {
        const GgufFile f = GgufFile::fromBytes(std::move(bytes));
        for (const TensorInfo& t : f.tensors()) QCOMPARE(f.tensorData(t).size(), size_t(t.nbytes));
        try {
          (void)moe::VocabData::fromGguf(f);
        } catch (const GgufError&) {
        }
        ++opened;
      } catch (const GgufError&) {
      }
    }
  }
  QVERIFY(opened > 0);  // flips inside tensor data must still open
}

void TestGgufRobustness::openReportsFileErrors() {
  QVERIFY(throwsWith([] { GgufFile::open("/nonexistent/x.gguf"); }, "/nonexistent/x.gguf: cannot open"));
  QVERIFY(throwsWith([] { GgufFile::open(MOECHAT_TEST_DATA); }, "not a regular file"));
  QVERIFY(
      throwsWith([] { GgufFile::open(MOECHAT_TEST_DATA "/gguf_corpus/bad_empty_file.gguf"); }, "empty file"));
  QVERIFY(throwsWith([] { GgufFile::fromBytes({}); }, "truncated file: magic"));

  // A FIFO with no writer: opening it for reading must not wait for one. Tried in a
  // child, so that a wait shows as a failure (the alarm) rather than a stuck test.
  QTemporaryDir dir;
  const QByteArray fifo = dir.filePath("model.gguf").toLocal8Bit();
  QCOMPARE(mkfifo(fifo.constData(), 0600), 0);
  const pid_t child = fork();
  QVERIFY(child >= 0);
  if (child == 0) {
    alarm(30);
    _exit(throwsWith([&] { GgufFile::open(fifo.toStdString()); }, "not a regular file") ? 0 : 1);
  }
  int status = 0;
  QCOMPARE(waitpid(child, &status, 0), child);
  QVERIFY2(WIFEXITED(status), "opening a FIFO waited for a writer");
  QCOMPARE(WEXITSTATUS(status), 0);
}

void TestGgufRobustness::interopWithHuggingfaceParser() {
  // Cross-check with a third-party parser: tools/interop (npm ci --prefix tools/interop).
  const QString node = QStandardPaths::findExecutable("node");
  const QString interop = repoRoot() + "/tools/interop";
  if (node.isEmpty()) QSKIP("node not found: install Node.js to run the GGUF interop check");
  if (!QDir(interop + "/node_modules/@huggingface/gguf").exists()) {
    QSKIP(
        "tools/interop/node_modules missing: run `npm ci --prefix tools/interop` to enable the interop "
        "check");
  }
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const std::string path = dir.filePath("interop.gguf").toStdString();
  GgufWriter w = smallModelWriter();
  w.setAlignment(64);
  for (const auto& [k, v] : everyValueType()) w.setValue(k, v);
  for (uint32_t id : kAllTensorTypeIds) {
    const auto traits = *typeTraits(id);
    const std::vector<uint64_t> dims = {traits.block_elems * 2ull, 3, 2};
    const auto type = static_cast<TensorType>(id);
    w.addTensor(std::string("blk.0.t_") + traits.name, dims, type,
                std::vector<uint8_t>(rowBytes(type, dims[0]) * 6, uint8_t(id)));
  }
  w.writeFile(path);
  const GgufFile ours = GgufFile::open(path);

  QProcess proc;
  proc.start(node, {interop + "/gguf_dump.mjs", QString::fromStdString(path)});
  QVERIFY(proc.waitForFinished(60000));
  QVERIFY2(proc.exitCode() == 0, proc.readAllStandardError().constData());
  const QJsonObject theirs = QJsonDocument::fromJson(proc.readAllStandardOutput()).object();

  QCOMPARE(theirs["architecture"].toString().toStdString(), *ours.getString("general.architecture"));
  QCOMPARE(theirs["version"].toInt(), 3);
  QCOMPARE(theirs["tensor_data_offset"].toString().toULongLong(), ours.dataOffset());
  const QJsonArray tensors = theirs["tensors"].toArray();
  QCOMPARE(size_t(tensors.size()), ours.tensors().size());
  for (size_t i = 0; i < ours.tensors().size(); ++i) {
    const TensorInfo& t = ours.tensors()[i];
    const QJsonObject j = tensors[int(i)].toObject();
    QCOMPARE(j["name"].toString().toStdString(), t.name);
    QCOMPARE(uint32_t(j["dtype"].toInt()), static_cast<uint32_t>(t.type));
    QCOMPARE(j["offset"].toString().toULongLong(), t.offset);
    const QJsonArray shape = j["shape"].toArray();
    QCOMPARE(size_t(shape.size()), t.dims.size());
    for (int d = 0; d < shape.size(); ++d) QCOMPARE(shape[d].toString().toULongLong(), t.dims[d]);
  }
  const QJsonObject meta = theirs["metadata"].toObject();
  QCOMPARE(size_t(meta.size()), ours.metadata().size());
  for (const KeyValue& kv : ours.metadata()) {
    const QJsonObject j = meta[QString::fromStdString(kv.key)].toObject();
    QVERIFY2(!j.isEmpty(), kv.key.c_str());
    QCOMPARE(uint32_t(j["type"].toInt()), static_cast<uint32_t>(kv.value.type));
    const QJsonValue val = j["value"];
    if (const std::string* s = kv.value.asString()) {
      QCOMPARE(val.toString().toStdString(), *s);
    } else if (const auto* arr = kv.value.asArray()) {
      QCOMPARE(uint32_t(j["sub_type"].toInt()), static_cast<uint32_t>(kv.value.array_type));
      QCOMPARE(size_t(val.toArray().size()), arr->size());
    } else if (kv.value.type == ValueType::U64 || kv.value.type == ValueType::I64) {
      QCOMPARE(val.toString().toStdString(), kv.value.type == ValueType::U64
                                                 ? std::to_string(*kv.value.asUint())
                                                 : std::to_string(*kv.value.asInt()));
    } else if (auto b = kv.value.asBool()) {
      QCOMPARE(val.toBool(), *b);
    } else {
      QCOMPARE(val.toDouble(), *kv.value.asFloat());
    }
  }
}

// A file whose header (metadata and tensor infos) the third-party writer of
// @huggingface/gguf serialised (tools/interop/gguf_rewrite.mjs, the code behind
// the Hugging Face hub's GGUF metadata editor): it opens, every tensor's bytes are
// where they were, and the engine computes the same logits as from our own file.
void TestGgufRobustness::runsModelsWhoseHeaderAThirdPartyWrote() {
  const QString node = QStandardPaths::findExecutable("node");
  const QString interop = repoRoot() + "/tools/interop";
  if (node.isEmpty()) QSKIP("node not found: install Node.js to run the GGUF interop check");
  if (!QDir(interop + "/node_modules/@huggingface/gguf").exists())
    QSKIP("tools/interop/node_modules missing: run `npm ci --prefix tools/interop`");
  QTemporaryDir dir;
  for (const char* arch : {"llama", "qwen2moe", "qwen3moe", "deepseek", "olmoe"}) {
    const QString original = QString(MOECHAT_TEST_DATA) + "/golden/" + arch + ".gguf";
    const QString rewritten = dir.filePath(QString(arch) + ".gguf");
    QProcess proc;
    proc.start(node, {interop + "/gguf_rewrite.mjs", original, rewritten});
    QVERIFY(proc.waitForFinished(60000));
    QVERIFY2(proc.exitCode() == 0, proc.readAllStandardError().constData());

    GgufFile ours = GgufFile::open(original.toStdString());
    GgufFile theirs = GgufFile::open(rewritten.toStdString());
    QCOMPARE(*theirs.getString("general.description"), std::string("header rewritten by @huggingface/gguf"));
    QCOMPARE(theirs.metadata().size(), ours.metadata().size() + 1);
    QCOMPARE(theirs.tensors().size(), ours.tensors().size());
    for (const auto& t : ours.tensors()) {
      const TensorInfo* u = theirs.findTensor(t.name);
      QVERIFY(u);
      QCOMPARE(u->dims, t.dims);
      const auto a = ours.tensorData(t), b = theirs.tensorData(*u);
      QVERIFY(a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin()));
    }

    auto backend = moe::makeCpuBackend(1);
    std::vector<float> logits[2];
    GgufFile* files[2] = {&ours, &theirs};
    for (int i = 0; i < 2; ++i) {
      auto model = moe::Model::load(std::move(*files[i]), *backend);
      moe::ResidentExpertSource experts(model->hostExperts());
      moe::Transformer t(*model, *backend, experts, 64);
      const int32_t tokens[] = {3, 17, 42, 5};
      t.forward(tokens, logits[i], true);
    }
    QVERIFY2(logits[0] == logits[1], arch);
  }
}

QTEST_APPLESS_MAIN(TestGgufRobustness)
#include "test_gguf_robustness.moc"
