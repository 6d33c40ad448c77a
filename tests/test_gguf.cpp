// GGUF v3 reader/writer and VocabData. Format facts: ggml docs/gguf.md
// (shared/GGUF-NOTES.md). Files built byte by byte here and in
// tests/data/gguf_corpus/make_corpus.py check the spec independently of our writer.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>

#include <time.h>

#include "models/gguf.h"
#include "models/vocab.h"

using namespace moe::gguf;

namespace {

// ---- helpers ---------------------------------------------------------------

// Independent little-endian GGUF byte builder (does not use GgufWriter).
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
    return *this;
  }
  Bytes& str(std::string_view s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& padTo(size_t a) {
    while (b.size() % a != 0) b.push_back(0);
    return *this;
  }
};

std::vector<uint8_t> fromHex(const char* hex) {
  std::vector<uint8_t> out;
  auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (const char* p = hex; *p != 0;) {
    if (*p == ' ' || *p == '\n') {
      ++p;
      continue;
    }
    out.push_back(static_cast<uint8_t>(nibble(p[0]) << 4 | nibble(p[1])));
    p += 2;
  }
  return out;
}

std::vector<uint8_t> patternBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(rng());
  return v;
}

bool sameScalar(const Value& a, const Value& b) {
  if (a.data.index() != b.data.index()) return false;
  if (auto u = std::get_if<uint64_t>(&a.data)) return *u == std::get<uint64_t>(b.data);
  if (auto i = std::get_if<int64_t>(&a.data)) return *i == std::get<int64_t>(b.data);
  if (auto d = std::get_if<double>(&a.data)) return *d == std::get<double>(b.data);
  if (auto x = std::get_if<bool>(&a.data)) return *x == std::get<bool>(b.data);
  if (auto s = std::get_if<std::string>(&a.data)) return *s == std::get<std::string>(b.data);
  return false;
}

bool sameValue(const Value& a, const Value& b) {
  if (a.type != b.type) return false;
  if (a.type != ValueType::Array) return sameScalar(a, b);
  if (a.array_type != b.array_type) return false;
  const auto& x = *a.asArray();
  const auto& y = *b.asArray();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!sameValue(x[i], y[i])) return false;
  }
  return true;
}

// Expects fn to throw GgufError whose message contains `needle`.
template <typename Fn>
bool throwsWith(Fn fn, const std::string& needle, std::string* got = nullptr) {
  try {
    fn();
  } catch (const GgufError& e) {
    if (got) *got = e.what();
    return std::string(e.what()).find(needle) != std::string::npos;
  }
  if (got) *got = "(no exception)";
  return false;
}

const std::vector<uint32_t> kAllTensorTypeIds = {0, 1, 2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 24, 25, 26, 30, 39};

std::vector<std::pair<std::string, Value>> everyValueType() {
  using VT = ValueType;
  std::vector<std::pair<std::string, Value>> kv = {
      {"v.u8", Value::ofUint(VT::U8, 255)},
      {"v.i8", Value::ofInt(VT::I8, -128)},
      {"v.u16", Value::ofUint(VT::U16, 65535)},
      {"v.i16", Value::ofInt(VT::I16, -32768)},
      {"v.u32", Value::ofUint(VT::U32, 4294967295u)},
      {"v.i32", Value::ofInt(VT::I32, -2147483647 - 1)},
      {"v.f32", Value::ofFloat(VT::F32, 3.25)},
      {"v.bool", Value::ofBool(true)},
      {"v.string", Value::ofString("")},  // set below: holds a NUL byte
      {"v.u64", Value::ofUint(VT::U64, UINT64_MAX)},
      {"v.i64", Value::ofInt(VT::I64, INT64_MIN)},
      {"v.f64", Value::ofFloat(VT::F64, -1e300)},
      {"v.empty_string", Value::ofString("")},
      {"v.empty_array", Value::ofArray(VT::U32, {})},
      {"v.arr_u8", Value::ofArray(VT::U8, {Value::ofUint(VT::U8, 0), Value::ofUint(VT::U8, 7)})},
      {"v.arr_i16", Value::ofArray(VT::I16, {Value::ofInt(VT::I16, -1)})},
      {"v.arr_f64", Value::ofArray(VT::F64, {Value::ofFloat(VT::F64, 0.5), Value::ofFloat(VT::F64, -2)})},
      {"v.arr_bool", Value::ofArray(VT::Bool, {Value::ofBool(false), Value::ofBool(true)})},
      {"v.arr_i64", Value::ofArray(VT::I64, {Value::ofInt(VT::I64, INT64_MAX)})},
  };
  static const char kText[] = "unicode \xE2\x9C\x93 and \0 inside";
  kv[8].second = Value::ofString(std::string(kText, sizeof kText - 1));
  // Nested: array of arrays of strings, and array of arrays of arrays of i32.
  Value inner1 = Value::ofArray(VT::String, {Value::ofString("a"), Value::ofString("bc")});
  Value inner2 = Value::ofArray(VT::String, {});
  kv.push_back({"v.nested_str", Value::ofArray(VT::Array, {inner1, inner2})});
  Value deep = Value::ofArray(VT::I32, {Value::ofInt(VT::I32, 42)});
  for (int i = 0; i < 3; ++i) deep = Value::ofArray(VT::Array, {deep});
  kv.push_back({"v.nested_deep", deep});
  return kv;
}

// A small writer-made model with vocab, metadata of several types and tensors.
GgufWriter smallModelWriter() {
  GgufWriter w;
  w.setString("general.architecture", "llama");
  w.setUint32("llama.block_count", 1);
  w.setFloat32("llama.rope.freq_base", 10000.0f);
  moe::VocabData v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>", "a", "b"};
  v.scores = {0, 0, 0, -1, -2};
  v.token_types = {2, 3, 3, 1, 1};
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  v.writeTo(w);
  w.setValue("x.nested", Value::ofArray(ValueType::Array, {Value::ofArray(ValueType::U16, {Value::ofUint(ValueType::U16, 9)})}));
  w.addTensor("token_embd.weight", {32, 5}, TensorType::Q8_0, patternBytes(34 * 5, 1));
  w.addTensor("output_norm.weight", {32}, TensorType::F32, patternBytes(128, 2));
  return w;
}

double threadCpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

QString repoRoot() { return QDir(QStringLiteral(MOECHAT_TEST_DATA "/../..")).canonicalPath(); }

}  // namespace

class TestGguf : public QObject {
  Q_OBJECT

 private slots:
  void typeTraitsMatchGgml();
  void everyValueTypeRoundTrips();
  void everyTensorTypeRoundTrips();
  void alignmentVariants_data();
  void alignmentVariants();
  void writerRejectsInvalidInput();
  void setValueReplacesInPlace();
  void byteExactLayout();
  void readsHandBuiltLlamaCppMoeFile();
  void corpusFilesGiveExpectedErrors();
  void truncationAtEveryOffsetThrows();
  void byteFlipsNeverCrash();
  void typedGettersCheckTypes();
  void openReportsFileErrors();
  void writeFileStreamsGeneratedTensors();
  void vocabRoundTrip();
  void largeVocabParsesQuickly();
  void interopWithHuggingfaceParser();
};

void TestGguf::typeTraitsMatchGgml() {
  // Block sizes from ggml-common.h; GGUF-NOTES.md lists the ones the engine relies on.
  struct Expect { uint32_t id; uint32_t elems, bytes; };
  for (Expect e : {Expect{0, 1, 4}, {1, 1, 2}, {2, 32, 18}, {8, 32, 34}, {12, 256, 144}, {13, 256, 176},
                   {14, 256, 210}, {30, 1, 2}, {39, 32, 17}, {10, 256, 84}, {11, 256, 110}}) {
    auto t = typeTraits(e.id);
    QVERIFY2(t.has_value(), qPrintable(QString::number(e.id)));
    QCOMPARE(t->block_elems, e.elems);
    QCOMPARE(t->block_bytes, e.bytes);
  }
  QVERIFY(!typeTraits(4).has_value());   // Q4_2, removed from ggml
  QVERIFY(!typeTraits(999).has_value());
  QCOMPARE(rowBytes(TensorType::Q4_K, 512), uint64_t{288});
  QCOMPARE(rowBytes(TensorType::MXFP4, 64), uint64_t{34});
  QVERIFY(throwsWith([] { rowBytes(TensorType::Q6_K, 255); }, "not a whole number of Q6_K blocks"));
  QCOMPARE(std::string(tensorTypeName(TensorType::BF16)), std::string("BF16"));
  QCOMPARE(std::string(valueTypeName(ValueType::F64)), std::string("f64"));
}

void TestGguf::everyValueTypeRoundTrips() {
  GgufWriter w;
  const auto kv = everyValueType();
  for (const auto& [k, v] : kv) w.setValue(k, v);
  const GgufFile f = GgufFile::fromBytes(w.toBytes());
  QCOMPARE(f.metadata().size(), kv.size());
  for (size_t i = 0; i < kv.size(); ++i) {
    QCOMPARE(f.metadata()[i].key, kv[i].first);  // insertion order
    QVERIFY2(sameValue(f.metadata()[i].value, kv[i].second), kv[i].first.c_str());
  }
  QCOMPARE(*f.getUint("v.u64"), UINT64_MAX);
  QCOMPARE(*f.getInt("v.i64"), INT64_MIN);
  QCOMPARE(*f.getFloat("v.f32"), 3.25);
  QCOMPARE(f.getString("v.string")->size(), size_t{24});
}

void TestGguf::everyTensorTypeRoundTrips() {
  GgufWriter w;
  std::vector<std::vector<uint8_t>> data;
  for (uint32_t id : kAllTensorTypeIds) {
    const auto traits = *typeTraits(id);
    const std::vector<uint64_t> dims = {traits.block_elems * 2ull, 3, 1 + id % 2};
    const auto type = static_cast<TensorType>(id);
    const uint64_t n = rowBytes(type, dims[0]) * dims[1] * dims[2];
    data.push_back(patternBytes(n, id));
    if (id % 2 == 0) {
      w.addTensor(std::string("t.") + traits.name, dims, type, data.back());
    } else {
      auto copy = data.back();
      w.addTensorGenerated(std::string("t.") + traits.name, dims, type,
                           [copy](std::span<uint8_t> dst) { std::memcpy(dst.data(), copy.data(), dst.size()); });
    }
  }
  const GgufFile f = GgufFile::fromBytes(w.toBytes());
  QCOMPARE(f.tensors().size(), kAllTensorTypeIds.size());
  for (size_t i = 0; i < kAllTensorTypeIds.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    QCOMPARE(static_cast<uint32_t>(t.type), kAllTensorTypeIds[i]);
    QCOMPARE(t.offset % kDefaultAlignment, uint64_t{0});
    QCOMPARE(t.nbytes, uint64_t(data[i].size()));
    QCOMPARE(t.nElements(), t.ne(0) * t.ne(1) * t.ne(2));
    const auto bytes = f.tensorData(t);
    QVERIFY2(std::equal(bytes.begin(), bytes.end(), data[i].begin(), data[i].end()), t.name.c_str());
    QCOMPARE(f.findTensor(t.name), &t);
  }
  QVERIFY(f.findTensor("missing") == nullptr);
}

void TestGguf::alignmentVariants_data() {
  QTest::addColumn<uint32_t>("alignment");
  QTest::newRow("8 (spec minimum)") << 8u;
  QTest::newRow("32 (default)") << 32u;
  QTest::newRow("64") << 64u;
  QTest::newRow("4096") << 4096u;
}

void TestGguf::alignmentVariants() {
  QFETCH(uint32_t, alignment);
  GgufWriter w;
  if (alignment != kDefaultAlignment) w.setAlignment(alignment);
  w.addTensor("a", {3}, TensorType::F32, patternBytes(12, 1));
  w.addTensor("b", {5}, TensorType::F16, patternBytes(10, 2));
  w.addTensor("c", {32}, TensorType::Q8_0, patternBytes(34, 3));
  const auto bytes = w.toBytes();
  QCOMPARE(bytes.size() % alignment, size_t{0});  // padded after the last tensor too
  const GgufFile f = GgufFile::fromBytes(bytes);
  QCOMPARE(f.alignment(), uint64_t{alignment});
  QCOMPARE(f.dataOffset() % alignment, uint64_t{0});
  for (const TensorInfo& t : f.tensors()) QCOMPARE(t.offset % alignment, uint64_t{0});
  QCOMPARE(f.tensors()[1].offset, uint64_t{std::max<uint32_t>(alignment, 16)});

  // Reader side: alignment 1 (accepted by llama.cpp; gguf.md asks writers for multiples of 8).
  const GgufFile one = GgufFile::open(MOECHAT_TEST_DATA "/gguf_corpus/ok_align1.gguf");
  QCOMPARE(one.alignment(), uint64_t{1});
  QCOMPARE(one.tensors()[1].offset, uint64_t{6});
}

void TestGguf::writerRejectsInvalidInput() {
  GgufWriter w;
  QVERIFY(throwsWith([&] { w.setAlignment(1); }, "power of two in 8..1048576"));
  QVERIFY(throwsWith([&] { w.setAlignment(48); }, "power of two in 8..1048576"));
  QVERIFY(throwsWith([&] { w.setAlignment(1u << 21); }, "power of two in 8..1048576"));
  QVERIFY(throwsWith([&] { w.setUint64("general.alignment", 64); }, "general.alignment must be a u32"));
  QVERIFY(throwsWith([&] { w.addTensor("a", {4}, TensorType::F32, std::vector<uint8_t>(15)); },
                     "has 15 bytes, its type and dims need 16"));
  QVERIFY(throwsWith([&] { w.addTensor("q", {48}, TensorType::Q8_0, std::vector<uint8_t>(51)); },
                     "not a whole number of Q8_0 blocks"));
  QVERIFY(throwsWith([&] { w.addTensor(std::string(65, 'n'), {1}, TensorType::F32, std::vector<uint8_t>(4)); },
                     "must be 1..64 bytes"));
  QVERIFY(throwsWith([&] { w.addTensor("a", {1, 1, 1, 1, 1}, TensorType::F32, std::vector<uint8_t>(4)); },
                     "has 5 dims"));
  QVERIFY(throwsWith([&] { w.addTensor("a", {0}, TensorType::F32, {}); }, "zero dimension"));
  QVERIFY(throwsWith([&] { w.addTensor("a", {1}, static_cast<TensorType>(5), std::vector<uint8_t>(4)); },
                     "unknown type id 5"));
  w.addTensor("a", {1}, TensorType::F32, std::vector<uint8_t>(4));
  QVERIFY(throwsWith([&] { w.addTensor("a", {1}, TensorType::F32, std::vector<uint8_t>(4)); }, "duplicate tensor"));
  Value bad = Value::ofUint(ValueType::U8, 300);
  QVERIFY(throwsWith([&] { w.setValue("k", bad); }, "does not fit"));
  QVERIFY(throwsWith([&] { w.setValue("k", Value::ofFloat(ValueType::F32, 1e300)); }, "does not fit"));
  Value mixed = Value::ofArray(ValueType::U32, {Value::ofInt(ValueType::I32, 1)});
  QVERIFY(throwsWith([&] { w.setValue("k", mixed); }, "element of type i32 in an array of u32"));
  Value wrong;
  wrong.type = ValueType::String;  // variant still holds uint64_t
  QVERIFY(throwsWith([&] { w.setValue("k", wrong); }, "string holds"));
}

void TestGguf::setValueReplacesInPlace() {
  GgufWriter w;
  w.setString("a", "1");
  w.setUint32("b", 2);
  w.setString("c", "3");
  w.setFloat32("b", 2.5f);  // replaces, keeps position and takes the new type
  const GgufFile f = GgufFile::fromBytes(w.toBytes());
  QCOMPARE(f.metadata().size(), size_t{3});
  QCOMPARE(f.metadata()[1].key, std::string("b"));
  QCOMPARE(f.metadata()[1].value.type, ValueType::F32);
  QCOMPARE(*f.getFloat("b"), 2.5);
}

void TestGguf::byteExactLayout() {
  // Expected bytes written by hand from gguf.md: header, two key/values, one tensor
  // info, zero padding to 32, 8 bytes of f32 data, padding to 32.
  GgufWriter w;
  w.setString("general.architecture", "tiny");
  w.setUint32("tiny.block_count", 1);
  const float vals[2] = {1.0f, 2.0f};
  std::vector<uint8_t> data(8);
  std::memcpy(data.data(), vals, 8);
  w.addTensor("w", {2}, TensorType::F32, data);
  const auto expected = fromHex(
      "47475546"                      // magic "GGUF"
      "03000000"                      // version 3
      "0100000000000000"              // tensor_count 1
      "0200000000000000"              // kv_count 2
      "1400000000000000" "67656e6572616c2e617263686974656374757265"  // "general.architecture"
      "08000000"                      // type string
      "0400000000000000" "74696e79"   // "tiny"
      "1000000000000000" "74696e792e626c6f636b5f636f756e74"  // "tiny.block_count"
      "04000000" "01000000"           // u32 1
      "0100000000000000" "77"         // tensor name "w"
      "01000000"                      // n_dims 1
      "0200000000000000"              // ne0 2
      "00000000"                      // type F32
      "0000000000000000"              // offset 0
      // 133 bytes so far: 27 bytes of padding to the data section at 160
      "000000000000000000000000000000000000000000000000000000"
      "0000803f" "00000040"           // 1.0f, 2.0f
      "000000000000000000000000000000000000000000000000");  // pad to 192
  QCOMPARE(expected.size(), size_t{192});
  const auto got = w.toBytes();
  QCOMPARE(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i]) QFAIL(qPrintable(QString("first difference at byte %1").arg(i)));
  }
  const GgufFile f = GgufFile::fromBytes(expected);
  QCOMPARE(f.dataOffset(), uint64_t{160});
  QCOMPARE(*f.getString("general.architecture"), std::string("tiny"));
}

void TestGguf::readsHandBuiltLlamaCppMoeFile() {
  // Shaped like a llama.cpp-converted Mixtral-style file: optional q/k/v biases, no
  // output.weight (tied to token_embd), old-style per-expert 2-D tensors.
  const uint64_t n_embd = 32, n_ff = 64, n_vocab = 4, n_expert = 2;
  struct T { std::string name; std::vector<uint64_t> dims; TensorType type; };
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

void TestGguf::corpusFilesGiveExpectedErrors() {
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

void TestGguf::truncationAtEveryOffsetThrows() {
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

void TestGguf::byteFlipsNeverCrash() {
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

void TestGguf::typedGettersCheckTypes() {
  GgufWriter w;
  w.setString("s", "text");
  w.setInt32("neg", -3);
  w.setUint64("big", UINT64_MAX);
  w.setUint32("u", 7);
  w.setBool("b", true);
  w.setFloat32Array("fa", {1.5f, -2.0f});
  w.setInt32Array("ia", {1, -1});
  const GgufFile f = GgufFile::fromBytes(w.toBytes());
  QVERIFY(!f.getUint("absent").has_value());
  QVERIFY(!f.getStringArray("absent").has_value());
  QVERIFY(throwsWith([&] { (void)f.getUint("s"); }, "key 's': expected a non-negative integer, found string"));
  QVERIFY(throwsWith([&] { (void)f.getUint("neg"); }, "found i32"));
  QVERIFY(throwsWith([&] { (void)f.getInt("big"); }, "expected an integer that fits i64"));
  QVERIFY(throwsWith([&] { (void)f.getString("u"); }, "expected a string, found u32"));
  QVERIFY(throwsWith([&] { (void)f.getBool("u"); }, "expected a bool"));
  QVERIFY(throwsWith([&] { (void)f.getStringArray("fa"); }, "found array of f32"));
  QVERIFY(throwsWith([&] { (void)f.getIntArray("fa"); }, "array of integers"));
  QCOMPARE(*f.getInt("u"), int64_t{7});
  QCOMPARE(*f.getFloat("u"), 7.0);  // integers widen to float
  QCOMPARE(*f.getBool("b"), true);
  QCOMPARE(*f.getFloatArray("ia"), (std::vector<double>{1, -1}));
  QCOMPARE(*f.getIntArray("ia"), (std::vector<int64_t>{1, -1}));
  QCOMPARE(*f.getFloatArray("fa"), (std::vector<double>{1.5, -2.0}));
}

void TestGguf::openReportsFileErrors() {
  QVERIFY(throwsWith([] { GgufFile::open("/nonexistent/x.gguf"); }, "/nonexistent/x.gguf: cannot open"));
  QVERIFY(throwsWith([] { GgufFile::open(MOECHAT_TEST_DATA); }, "not a regular file"));
  QVERIFY(throwsWith([] { GgufFile::open(MOECHAT_TEST_DATA "/gguf_corpus/bad_empty_file.gguf"); }, "empty file"));
  QVERIFY(throwsWith([] { GgufFile::fromBytes({}); }, "truncated file: magic"));
}

void TestGguf::writeFileStreamsGeneratedTensors() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const std::string path = dir.filePath("gen.gguf").toStdString();
  GgufWriter w;
  w.setString("general.architecture", "llama");
  int fills = 0;
  for (int i = 0; i < 3; ++i) {
    w.addTensorGenerated("g" + std::to_string(i), {32, 2 + uint64_t(i)}, TensorType::Q8_0,
                         [&fills, i](std::span<uint8_t> dst) {
                           ++fills;
                           for (size_t k = 0; k < dst.size(); ++k) dst[k] = static_cast<uint8_t>(k * 3 + i);
                         });
  }
  w.addTensor("plain", {4}, TensorType::F32, patternBytes(16, 9));
  w.writeFile(path);
  QCOMPARE(fills, 3);  // one fill per generated tensor
  QVERIFY(!QFile::exists(QString::fromStdString(path + ".tmp")));
  QFile written(QString::fromStdString(path));
  QVERIFY(written.open(QIODevice::ReadOnly));
  const QByteArray onDisk = written.readAll();
  const auto inMemory = w.toBytes();
  QCOMPARE(size_t(onDisk.size()), inMemory.size());
  QVERIFY(std::memcmp(onDisk.constData(), inMemory.data(), inMemory.size()) == 0);

  const GgufFile f = GgufFile::open(path);
  QCOMPARE(f.path(), path);
  QCOMPARE(f.fileSize(), uint64_t(inMemory.size()));
  QCOMPARE(int(f.tensorData(*f.findTensor("g2"))[5]), 5 * 3 + 2);

  QVERIFY(throwsWith([&] { w.writeFile("/nonexistent-dir/x.gguf"); }, "cannot create /nonexistent-dir/x.gguf.tmp"));
}

void TestGguf::vocabRoundTrip() {
  moe::VocabData v;
  v.model = "gpt2";
  v.pre = "qwen2";
  v.tokens = {"a", "b", "ab", "<|endoftext|>", "<|im_end|>"};
  v.token_types = {1, 1, 1, 3, 3};
  v.merges = {"a b"};
  v.bos_id = 3;
  v.eos_id = 4;
  v.pad_id = 3;
  v.eot_id = 4;
  v.add_bos = false;
  v.add_space_prefix = false;
  v.remove_extra_whitespaces = true;
  v.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}";
  GgufWriter w;
  v.writeTo(w);
  const auto r = moe::VocabData::fromGguf(GgufFile::fromBytes(w.toBytes()));
  QCOMPARE(r.model, v.model);
  QCOMPARE(r.pre, v.pre);
  QCOMPARE(r.tokens, v.tokens);
  QVERIFY(r.scores.empty());
  QCOMPARE(r.token_types, v.token_types);
  QCOMPARE(r.merges, v.merges);
  QCOMPARE(r.bos_id, 3);
  QCOMPARE(r.eos_id, 4);
  QCOMPARE(r.unk_id, -1);
  QCOMPARE(r.pad_id, 3);
  QCOMPARE(r.eot_id, 4);
  QCOMPARE(r.add_bos, false);
  QCOMPARE(r.add_space_prefix, false);
  QCOMPARE(r.remove_extra_whitespaces, true);
  QCOMPARE(r.chat_template, v.chat_template);

  moe::VocabData l;
  l.model = "llama";
  l.tokens = {"<unk>", "<s>", "</s>", "<0x0A>"};
  l.scores = {0.0f, -0.5f, 1e-3f, -1000.0f};
  l.token_types = {2, 3, 3, 6};
  l.unk_id = 0;
  GgufWriter lw;
  l.writeTo(lw);
  const auto lr = moe::VocabData::fromGguf(GgufFile::fromBytes(lw.toBytes()));
  QCOMPARE(lr.scores, l.scores);
  QCOMPARE(lr.unk_id, 0);
  QVERIFY(lr.pre.empty());

  GgufWriter none;
  none.setString("tokenizer.ggml.model", "llama");
  QVERIFY(throwsWith([&] { moe::VocabData::fromGguf(GgufFile::fromBytes(none.toBytes())); },
                     "missing or empty tokenizer.ggml.tokens"));
}

void TestGguf::largeVocabParsesQuickly() {
  // A 150k-token BPE vocabulary (Qwen-sized) with scores, types and merges.
  const size_t n = 150000;
  moe::VocabData v;
  v.model = "gpt2";
  v.pre = "qwen2";
  v.tokens.reserve(n);
  for (size_t i = 0; i < n; ++i) v.tokens.push_back("tok" + std::to_string(i));
  v.scores.assign(n, 0.0f);
  v.token_types.assign(n, 1);
  for (size_t i = 0; i + 1 < n; ++i) v.merges.push_back("t ok" + std::to_string(i));
  GgufWriter w;
  v.writeTo(w);
  auto bytes = w.toBytes();

  // CPU time of this thread, not wall time: the test must not fail on a loaded CI machine.
  QElapsedTimer wall;
  wall.start();
  const double cpu_start = threadCpuMs();
  const GgufFile f = GgufFile::fromBytes(std::move(bytes));
  const auto r = moe::VocabData::fromGguf(f);
  const double ms = threadCpuMs() - cpu_start;
  QCOMPARE(r.tokens.size(), n);
  QCOMPARE(r.merges.size(), n - 1);
  qInfo("parsed 150k tokens + 150k merges + scores + types: %.0f ms CPU, %lld ms wall", ms, wall.elapsed());
#if defined(__SANITIZE_ADDRESS__)
  const double limit = 10000;  // ASan/UBSan builds run several times slower
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  const double limit = 10000;
#else
  const double limit = 1000;
#endif
#else
  const double limit = 1000;
#endif
  QVERIFY2(ms < limit, qPrintable(QString("took %1 ms").arg(ms)));
}

void TestGguf::interopWithHuggingfaceParser() {
  // Cross-check with a third-party parser: tools/interop (npm ci --prefix tools/interop).
  const QString node = QStandardPaths::findExecutable("node");
  const QString interop = repoRoot() + "/tools/interop";
  if (node.isEmpty()) QSKIP("node not found: install Node.js to run the GGUF interop check");
  if (!QDir(interop + "/node_modules/@huggingface/gguf").exists()) {
    QSKIP("tools/interop/node_modules missing: run `npm ci --prefix tools/interop` to enable the interop check");
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
      QCOMPARE(val.toString().toStdString(), kv.value.type == ValueType::U64 ? std::to_string(*kv.value.asUint())
                                                                             : std::to_string(*kv.value.asInt()));
    } else if (auto b = kv.value.asBool()) {
      QCOMPARE(val.toBool(), *b);
    } else {
      QCOMPARE(val.toDouble(), *kv.value.asFloat());
    }
  }
}

QTEST_APPLESS_MAIN(TestGguf)
#include "test_gguf.moc"
