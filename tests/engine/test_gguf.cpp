// GGUF v3 reader/writer and VocabData. Format facts: ggml docs/gguf.md
// (shared/GGUF-NOTES.md). Files built byte by byte here and in
// tests/data/gguf_corpus/make_corpus.py check the spec independently of our writer.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>

#include "support/gguf_test_util.h"
#include "support/temp_dir.h"
#include "support/test_log.h"

TEST(Gguf, typeTraitsMatchGgml) {
  // Block sizes from ggml-common.h; GGUF-NOTES.md lists the ones the engine relies on.
  struct Expect {
    uint32_t id;
    uint32_t elems, bytes;
  };
  for (Expect e : {Expect{0, 1, 4},
                   {1, 1, 2},
                   {2, 32, 18},
                   {8, 32, 34},
                   {12, 256, 144},
                   {13, 256, 176},
                   {14, 256, 210},
                   {30, 1, 2},
                   {39, 32, 17},
                   {10, 256, 84},
                   {11, 256, 110}}) {
    auto t = typeTraits(e.id);
    ASSERT_TRUE(t.has_value()) << e.id;
    ASSERT_EQ(t->block_elems, e.elems);
    ASSERT_EQ(t->block_bytes, e.bytes);
  }
  ASSERT_TRUE(!typeTraits(4).has_value());  // Q4_2, removed from ggml
  ASSERT_TRUE(!typeTraits(999).has_value());
  ASSERT_EQ(rowBytes(TensorType::Q4_K, 512), uint64_t{288});
  ASSERT_EQ(rowBytes(TensorType::MXFP4, 64), uint64_t{34});
  ASSERT_TRUE(throwsWith([] { rowBytes(TensorType::Q6_K, 255); }, "not a whole number of Q6_K blocks"));
  ASSERT_EQ(std::string(tensorTypeName(TensorType::BF16)), std::string("BF16"));
  ASSERT_EQ(std::string(valueTypeName(ValueType::F64)), std::string("f64"));
}

TEST(Gguf, everyValueTypeRoundTrips) {
  GgufWriter w;
  const auto kv = everyValueType();
  for (const auto& [k, v] : kv) w.setValue(k, v);
  const GgufFile f = GgufFile::fromBytes(w.toBytes());
  ASSERT_EQ(f.metadata().size(), kv.size());
  for (size_t i = 0; i < kv.size(); ++i) {
    ASSERT_EQ(f.metadata()[i].key, kv[i].first);  // insertion order
    ASSERT_TRUE(sameValue(f.metadata()[i].value, kv[i].second)) << kv[i].first.c_str();
  }
  ASSERT_EQ(*f.getUint("v.u64"), UINT64_MAX);
  ASSERT_EQ(*f.getInt("v.i64"), INT64_MIN);
  ASSERT_DOUBLE_EQ(*f.getFloat("v.f32"), 3.25);
  ASSERT_EQ(f.getString("v.string")->size(), size_t{24});
}

TEST(Gguf, everyTensorTypeRoundTrips) {
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
      w.addTensorGenerated(std::string("t.") + traits.name, dims, type, [copy](std::span<uint8_t> dst) {
        std::memcpy(dst.data(), copy.data(), dst.size());
      });
    }
  }
  const GgufFile f = GgufFile::fromBytes(w.toBytes());
  ASSERT_EQ(f.tensors().size(), kAllTensorTypeIds.size());
  for (size_t i = 0; i < kAllTensorTypeIds.size(); ++i) {
    const TensorInfo& t = f.tensors()[i];
    ASSERT_EQ(static_cast<uint32_t>(t.type), kAllTensorTypeIds[i]);
    ASSERT_EQ(t.offset % kDefaultAlignment, uint64_t{0});
    ASSERT_EQ(t.nbytes, uint64_t(data[i].size()));
    ASSERT_EQ(t.nElements(), t.ne(0) * t.ne(1) * t.ne(2));
    const auto bytes = f.tensorData(t);
    ASSERT_TRUE(std::equal(bytes.begin(), bytes.end(), data[i].begin(), data[i].end())) << t.name.c_str();
    ASSERT_EQ(f.findTensor(t.name), &t);
  }
  ASSERT_TRUE(f.findTensor("missing") == nullptr);
}

// One row of alignmentVariants (a fatal failure ends the row, not the case).
static void checkAlignment(uint32_t alignment) {
  GgufWriter w;
  if (alignment != kDefaultAlignment) w.setAlignment(alignment);
  w.addTensor("a", {3}, TensorType::F32, patternBytes(12, 1));
  w.addTensor("b", {5}, TensorType::F16, patternBytes(10, 2));
  w.addTensor("c", {32}, TensorType::Q8_0, patternBytes(34, 3));
  const auto bytes = w.toBytes();
  ASSERT_EQ(bytes.size() % alignment, size_t{0});  // padded after the last tensor too
  const GgufFile f = GgufFile::fromBytes(bytes);
  ASSERT_EQ(f.alignment(), uint64_t{alignment});
  ASSERT_EQ(f.dataOffset() % alignment, uint64_t{0});
  for (const TensorInfo& t : f.tensors()) ASSERT_EQ(t.offset % alignment, uint64_t{0});
  ASSERT_EQ(f.tensors()[1].offset, uint64_t{std::max<uint32_t>(alignment, 16)});

  // Reader side: alignment 1 (accepted by llama.cpp; gguf.md asks writers for multiples of 8).
  const GgufFile one = GgufFile::open(MOECHAT_TEST_DATA "/gguf_corpus/ok_align1.gguf");
  ASSERT_EQ(one.alignment(), uint64_t{1});
  ASSERT_EQ(one.tensors()[1].offset, uint64_t{6});
}

TEST(Gguf, alignmentVariants) {
  const struct {
    const char* name;
    uint32_t alignment;
  } rows[] = {
      {"8 (spec minimum)", 8u},
      {"32 (default)", 32u},
      {"64", 64u},
      {"4096", 4096u},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    checkAlignment(row.alignment);
  }
}

TEST(Gguf, writerRejectsInvalidInput) {
  GgufWriter w;
  ASSERT_TRUE(throwsWith([&] { w.setAlignment(1); }, "power of two in 8..1048576"));
  ASSERT_TRUE(throwsWith([&] { w.setAlignment(48); }, "power of two in 8..1048576"));
  ASSERT_TRUE(throwsWith([&] { w.setAlignment(1u << 21); }, "power of two in 8..1048576"));
  ASSERT_TRUE(throwsWith([&] { w.setUint64("general.alignment", 64); }, "general.alignment must be a u32"));
  ASSERT_TRUE(throwsWith([&] { w.addTensor("a", {4}, TensorType::F32, std::vector<uint8_t>(15)); },
                         "has 15 bytes, its type and dims need 16"));
  ASSERT_TRUE(throwsWith([&] { w.addTensor("q", {48}, TensorType::Q8_0, std::vector<uint8_t>(51)); },
                         "not a whole number of Q8_0 blocks"));
  ASSERT_TRUE(
      throwsWith([&] { w.addTensor(std::string(65, 'n'), {1}, TensorType::F32, std::vector<uint8_t>(4)); },
                 "must be 1..64 bytes"));
  ASSERT_TRUE(throwsWith(
      [&] {
        w.addTensor("a", {1, 1, 1, 1, 1}, TensorType::F32, std::vector<uint8_t>(4));
      },
      "has 5 dims"));
  ASSERT_TRUE(throwsWith([&] { w.addTensor("a", {0}, TensorType::F32, {}); }, "zero dimension"));
  ASSERT_TRUE(throwsWith([&] { w.addTensor("a", {1}, static_cast<TensorType>(5), std::vector<uint8_t>(4)); },
                         "unknown type id 5"));
  w.addTensor("a", {1}, TensorType::F32, std::vector<uint8_t>(4));
  ASSERT_TRUE(throwsWith([&] { w.addTensor("a", {1}, TensorType::F32, std::vector<uint8_t>(4)); },
                         "duplicate tensor"));
  Value bad = Value::ofUint(ValueType::U8, 300);
  ASSERT_TRUE(throwsWith([&] { w.setValue("k", bad); }, "does not fit"));
  ASSERT_TRUE(throwsWith([&] { w.setValue("k", Value::ofFloat(ValueType::F32, 1e300)); }, "does not fit"));
  Value mixed = Value::ofArray(ValueType::U32, {Value::ofInt(ValueType::I32, 1)});
  ASSERT_TRUE(throwsWith([&] { w.setValue("k", mixed); }, "element of type i32 in an array of u32"));
  Value wrong;
  wrong.type = ValueType::String;  // variant still holds uint64_t
  ASSERT_TRUE(throwsWith([&] { w.setValue("k", wrong); }, "string holds"));
}

TEST(Gguf, setValueReplacesInPlace) {
  GgufWriter w;
  w.setString("a", "1");
  w.setUint32("b", 2);
  w.setString("c", "3");
  w.setFloat32("b", 2.5f);  // replaces, keeps position and takes the new type
  const GgufFile f = GgufFile::fromBytes(w.toBytes());
  ASSERT_EQ(f.metadata().size(), size_t{3});
  ASSERT_EQ(f.metadata()[1].key, std::string("b"));
  ASSERT_EQ(f.metadata()[1].value.type, ValueType::F32);
  ASSERT_DOUBLE_EQ(*f.getFloat("b"), 2.5);
}

TEST(Gguf, byteExactLayout) {
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
      "47475546"          // magic "GGUF"
      "03000000"          // version 3
      "0100000000000000"  // tensor_count 1
      "0200000000000000"  // kv_count 2
      "1400000000000000"
      "67656e6572616c2e617263686974656374757265"  // "general.architecture"
      "08000000"                                  // type string
      "0400000000000000"
      "74696e79"  // "tiny"
      "1000000000000000"
      "74696e792e626c6f636b5f636f756e74"  // "tiny.block_count"
      "04000000"
      "01000000"  // u32 1
      "0100000000000000"
      "77"                // tensor name "w"
      "01000000"          // n_dims 1
      "0200000000000000"  // ne0 2
      "00000000"          // type F32
      "0000000000000000"  // offset 0
      // 133 bytes so far: 27 bytes of padding to the data section at 160
      "000000000000000000000000000000000000000000000000000000"
      "0000803f"
      "00000040"                                            // 1.0f, 2.0f
      "000000000000000000000000000000000000000000000000");  // pad to 192
  ASSERT_EQ(expected.size(), size_t{192});
  const auto got = w.toBytes();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i]) FAIL() << "first difference at byte " << i;
  }
  const GgufFile f = GgufFile::fromBytes(expected);
  ASSERT_EQ(f.dataOffset(), uint64_t{160});
  ASSERT_EQ(*f.getString("general.architecture"), std::string("tiny"));
}

TEST(Gguf, typedGettersCheckTypes) {
  GgufWriter w;
  w.setString("s", "text");
  w.setInt32("neg", -3);
  w.setUint64("big", UINT64_MAX);
  w.setUint32("u", 7);
  w.setBool("b", true);
  w.setFloat32Array("fa", {1.5f, -2.0f});
  w.setInt32Array("ia", {1, -1});
  const GgufFile f = GgufFile::fromBytes(w.toBytes());
  ASSERT_TRUE(!f.getUint("absent").has_value());
  ASSERT_TRUE(!f.getStringArray("absent").has_value());
  ASSERT_TRUE(
      throwsWith([&] { (void)f.getUint("s"); }, "key 's': expected a non-negative integer, found string"));
  ASSERT_TRUE(throwsWith([&] { (void)f.getUint("neg"); }, "found i32"));
  ASSERT_TRUE(throwsWith([&] { (void)f.getInt("big"); }, "expected an integer that fits i64"));
  ASSERT_TRUE(throwsWith([&] { (void)f.getString("u"); }, "expected a string, found u32"));
  ASSERT_TRUE(throwsWith([&] { (void)f.getBool("u"); }, "expected a bool"));
  ASSERT_TRUE(throwsWith([&] { (void)f.getStringArray("fa"); }, "found array of f32"));
  ASSERT_TRUE(throwsWith([&] { (void)f.getIntArray("fa"); }, "array of integers"));
  ASSERT_EQ(*f.getInt("u"), int64_t{7});
  ASSERT_DOUBLE_EQ(*f.getFloat("u"), 7.0);  // integers widen to float
  ASSERT_EQ(*f.getBool("b"), true);
  ASSERT_EQ(*f.getFloatArray("ia"), (std::vector<double>{1, -1}));
  ASSERT_EQ(*f.getIntArray("ia"), (std::vector<int64_t>{1, -1}));
  ASSERT_EQ(*f.getFloatArray("fa"), (std::vector<double>{1.5, -2.0}));
}

TEST(Gguf, writeFileStreamsGeneratedTensors) {
  moe::test::TempDir dir;
  const std::string path = dir.file("gen.gguf");
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
  ASSERT_EQ(fills, 3);  // one fill per generated tensor
  ASSERT_TRUE(!std::filesystem::exists(path + ".tmp"));
  std::ifstream written(path, std::ios::binary);
  ASSERT_TRUE(written.is_open());
  const std::vector<char> onDisk((std::istreambuf_iterator<char>(written)), std::istreambuf_iterator<char>());
  const auto inMemory = w.toBytes();
  ASSERT_EQ(size_t(onDisk.size()), inMemory.size());
  ASSERT_TRUE(std::memcmp(onDisk.data(), inMemory.data(), inMemory.size()) == 0);

  const GgufFile f = GgufFile::open(path);
  ASSERT_EQ(f.path(), path);
  ASSERT_EQ(f.fileSize(), uint64_t(inMemory.size()));
  ASSERT_EQ(int(f.tensorData(*f.findTensor("g2"))[5]), 5 * 3 + 2);

  ASSERT_TRUE(throwsWith([&] { w.writeFile("/nonexistent-dir/x.gguf"); },
                         "cannot create /nonexistent-dir/x.gguf.tmp"));
}

TEST(Gguf, vocabRoundTrip) {
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
  ASSERT_EQ(r.model, v.model);
  ASSERT_EQ(r.pre, v.pre);
  ASSERT_EQ(r.tokens, v.tokens);
  ASSERT_TRUE(r.scores.empty());
  ASSERT_EQ(r.token_types, v.token_types);
  ASSERT_EQ(r.merges, v.merges);
  ASSERT_EQ(r.bos_id, 3);
  ASSERT_EQ(r.eos_id, 4);
  ASSERT_EQ(r.unk_id, -1);
  ASSERT_EQ(r.pad_id, 3);
  ASSERT_EQ(r.eot_id, 4);
  ASSERT_EQ(r.add_bos, false);
  ASSERT_EQ(r.add_space_prefix, false);
  ASSERT_EQ(r.remove_extra_whitespaces, true);
  ASSERT_EQ(r.chat_template, v.chat_template);

  moe::VocabData l;
  l.model = "llama";
  l.tokens = {"<unk>", "<s>", "</s>", "<0x0A>"};
  l.scores = {0.0f, -0.5f, 1e-3f, -1000.0f};
  l.token_types = {2, 3, 3, 6};
  l.unk_id = 0;
  GgufWriter lw;
  l.writeTo(lw);
  const auto lr = moe::VocabData::fromGguf(GgufFile::fromBytes(lw.toBytes()));
  ASSERT_EQ(lr.scores, l.scores);
  ASSERT_EQ(lr.unk_id, 0);
  ASSERT_TRUE(lr.pre.empty());

  GgufWriter none;
  none.setString("tokenizer.ggml.model", "llama");
  ASSERT_TRUE(throwsWith([&] { moe::VocabData::fromGguf(GgufFile::fromBytes(none.toBytes())); },
                         "missing or empty tokenizer.ggml.tokens"));
}

TEST(Gguf, largeVocabRoundTrips) {
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

  // The time is reported, not asserted: tests check behaviour, benchmarks measure speed.
  const auto wall_start = std::chrono::steady_clock::now();
  const double cpu_start = threadCpuMs();
  const GgufFile f = GgufFile::fromBytes(std::move(bytes));
  const auto r = moe::VocabData::fromGguf(f);
  const double ms = threadCpuMs() - cpu_start;
  ASSERT_EQ(r.tokens.size(), n);
  ASSERT_EQ(r.merges.size(), n - 1);
  const long long wall_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - wall_start)
          .count();
  moe::test::info("parsed 150k tokens + 150k merges + scores + types: %.0f ms CPU, %lld ms wall", ms,
                  wall_ms);
  ASSERT_EQ(r.tokens.back(), std::string("tok149999"));
  ASSERT_EQ(r.merges.back(), std::string("t ok149998"));
}
