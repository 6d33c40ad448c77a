// The GGUF reader against malformed and foreign input: hand-built files shaped like
// llama.cpp's, the corpus of tricky files (tests/data/gguf_corpus/MANIFEST.txt),
// truncation at every offset, byte flips, file errors, and a third-party parser's
// view of files we write (tools/interop, @huggingface/gguf).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/gguf_test_util.h"

#include "inference/backend.h"
#include "inference/model.h"
#include "inference/transformer.h"
#include "offload/resident_expert_source.h"
#include "support/run_program.h"
#include "support/temp_dir.h"

namespace {

// The path of an executable found on PATH, or "".
std::string findExecutable(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return {};
  const std::string dirs = path;
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + name;
    if (std::filesystem::is_regular_file(candidate) && access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

// A JSON value: just enough of a reader for gguf_dump.mjs's output. A missing key
// or a value of another kind reads as null, "", 0 or false.
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;        // Array elements, or Object values
  std::vector<std::string> keys;  // Object keys, parallel to items

  const Json& operator[](const std::string& key) const {
    static const Json null;
    if (kind != Object) return null;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return items[i];
    return null;
  }
  const Json& operator[](size_t i) const {
    static const Json null;
    return kind == Array && i < items.size() ? items[i] : null;
  }
  size_t size() const { return kind == Array || kind == Object ? items.size() : 0; }
  bool isEmptyObject() const { return kind != Object || items.empty(); }
  std::string toString() const { return kind == String ? text : std::string(); }
  double toDouble() const { return kind == Number ? number : 0; }
  bool toBool() const { return kind == Bool && boolean; }
  int toInt() const {  // 0 unless an integral number
    return kind == Number && number == double(int(number)) ? int(number) : 0;
  }
  // A decimal string (the dump's 64-bit integers) as a number; 0 where it is not one.
  uint64_t toU64() const {
    if (kind != String || text.empty()) return 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
    return *end == 0 ? uint64_t(v) : 0;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& s) : s_(s) {}
  // The document, or nullopt with error() set.
  std::optional<Json> read() {
    Json v;
    if (!value(v, 0)) return std::nullopt;
    space();
    if (i_ != s_.size()) {
      bad("trailing characters");
      return std::nullopt;
    }
    return v;
  }
  const std::string& error() const { return error_; }

 private:
  bool bad(const std::string& why) {
    if (error_.empty()) error_ = why + " at offset " + std::to_string(i_);
    return false;
  }
  void space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool literal(const char* word) {
    const size_t n = std::strlen(word);
    if (s_.compare(i_, n, word) != 0) return false;
    i_ += n;
    return true;
  }
  bool value(Json& v, int depth) {
    if (depth > 64) return bad("nested too deeply");
    space();
    if (i_ >= s_.size()) return bad("unexpected end");
    const char c = s_[i_];
    if (c == '{') {
      v.kind = Json::Object;
      ++i_;
      space();
      if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
      for (;;) {
        space();
        std::string key;
        if (!string(key)) return false;
        space();
        if (i_ >= s_.size() || s_[i_] != ':') return bad("':' expected");
        ++i_;
        Json item;
        if (!value(item, depth + 1)) return false;
        v.keys.push_back(std::move(key));
        v.items.push_back(std::move(item));
        space();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
        return bad("',' or '}' expected");
      }
    }
    if (c == '[') {
      v.kind = Json::Array;
      ++i_;
      space();
      if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
      for (;;) {
        Json item;
        if (!value(item, depth + 1)) return false;
        v.items.push_back(std::move(item));
        space();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
        return bad("',' or ']' expected");
      }
    }
    if (c == '"') {
      v.kind = Json::String;
      return string(v.text);
    }
    if (literal("true")) return v.kind = Json::Bool, v.boolean = true, true;
    if (literal("false")) return v.kind = Json::Bool, v.boolean = false, true;
    if (literal("null")) return v.kind = Json::Null, true;
    const size_t start = i_;
    while (i_ < s_.size() && std::strchr("+-0123456789.eE", s_[i_]) != nullptr) ++i_;
    if (i_ == start) return bad("value expected");
    const std::string num = s_.substr(start, i_ - start);
    char* end = nullptr;
    v.kind = Json::Number;
    v.number = std::strtod(num.c_str(), &end);
    if (*end != 0) return bad("bad number");
    return true;
  }
  static void utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(char(cp));
    } else if (cp < 0x800) {
      out.push_back(char(0xC0 | cp >> 6));
      out.push_back(char(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(char(0xE0 | cp >> 12));
      out.push_back(char(0x80 | (cp >> 6 & 0x3F)));
      out.push_back(char(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(char(0xF0 | cp >> 18));
      out.push_back(char(0x80 | (cp >> 12 & 0x3F)));
      out.push_back(char(0x80 | (cp >> 6 & 0x3F)));
      out.push_back(char(0x80 | (cp & 0x3F)));
    }
  }
  bool hex4(uint32_t& cp) {
    if (i_ + 4 > s_.size()) return false;
    cp = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      cp <<= 4;
      if (h >= '0' && h <= '9')
        cp |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f')
        cp |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        cp |= uint32_t(h - 'A' + 10);
      else
        return false;
    }
    return true;
  }
  bool string(std::string& out) {
    if (i_ >= s_.size() || s_[i_] != '"') return bad("string expected");
    ++i_;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) break;
      const char e = s_[i_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          if (!hex4(cp)) return bad("bad \\u escape");
          if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(i_, 2, "\\u") == 0) {  // a surrogate pair
            const size_t at = i_;
            i_ += 2;
            uint32_t lo = 0;
            if (hex4(lo) && lo >= 0xDC00 && lo < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else {
              i_ = at;
            }
          }
          utf8(out, cp);
          break;
        }
        default: return bad("bad escape");
      }
    }
    return bad("unterminated string");
  }

  const std::string& s_;
  size_t i_ = 0;
  std::string error_;
};

}  // namespace

TEST(GgufRobustness, readsHandBuiltLlamaCppMoeFile) {
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
  ASSERT_EQ(f.tensors().size(), ts.size());
  ASSERT_EQ(f.dataOffset(), uint64_t{data_start});
  ASSERT_TRUE(f.findTensor("output.weight") == nullptr);
  ASSERT_TRUE(f.findTensor("blk.0.attn_q.bias") != nullptr);
  for (size_t i = 0; i < ts.size(); ++i) {
    const TensorInfo* t = f.findTensor(ts[i].name);
    ASSERT_TRUE(t != nullptr) << ts[i].name;
    ASSERT_EQ(t->dims, ts[i].dims);
    ASSERT_EQ(t->type, ts[i].type);
    ASSERT_EQ(t->offset, offsets[i]);
    const auto data = f.tensorData(*t);
    ASSERT_EQ(int(data.front()), int(i + 1));
    ASSERT_EQ(int(data.back()), int(i + 1));
  }
  ASSERT_EQ(f.findTensor("blk.0.ffn_gate.1.weight")->nbytes, uint64_t{34 * 64});
  ASSERT_EQ(*f.getUint("llama.expert_count"), n_expert);
  ASSERT_DOUBLE_EQ(*f.getFloat("llama.attention.layer_norm_rms_epsilon"), double(1e-5f));
  const auto vocab = moe::VocabData::fromGguf(f);
  ASSERT_EQ(vocab.tokens.size(), size_t{n_vocab});
  ASSERT_EQ(vocab.bos_id, -1);  // absent keys stay -1
}

TEST(GgufRobustness, corpusFilesGiveExpectedErrors) {
  const std::string dir = MOECHAT_TEST_DATA "/gguf_corpus/";
  std::ifstream manifest(dir + "MANIFEST.txt");
  ASSERT_TRUE(manifest.is_open());
  int checked = 0;
  for (std::string line; std::getline(manifest, line);) {
    const auto first = line.find_first_not_of(" \t\r\n\f\v");  // trimmed
    if (first == std::string::npos) continue;
    line = line.substr(first, line.find_last_not_of(" \t\r\n\f\v") + 1 - first);
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    for (size_t start = 0;;) {
      const size_t tab = line.find('\t', start);
      cols.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    ASSERT_TRUE(cols.size() >= 2) << line;
    const std::string path = dir + cols[0];
    const std::string expect = cols[1];
    std::optional<GgufFile> f;
    std::string error;
    try {
      f = GgufFile::open(path);
    } catch (const GgufError& e) {
      error = e.what();
    }
    const std::string what = cols[0] + ": got \"" + error + "\"";
    if (expect == "ok") {
      ASSERT_TRUE(f.has_value()) << what;
    } else {
      ASSERT_TRUE(!f && error.find(expect) != std::string::npos) << what + ", want \"" + expect + "\"";
    }
    if (f && cols.size() >= 3) {
      const std::string vexpect = cols[2];
      std::string verr = "ok";
      try {
        (void)moe::VocabData::fromGguf(*f);
      } catch (const GgufError& e) {
        verr = e.what();
      }
      ASSERT_TRUE(verr.find(vexpect) != std::string::npos)
          << cols[0] + ": vocab got \"" + verr + "\", want \"" + vexpect + "\"";
    }
    ++checked;
  }
  ASSERT_TRUE(checked >= 40);
}

TEST(GgufRobustness, truncationAtEveryOffsetThrows) {
  const auto full = smallModelWriter().toBytes();
  const GgufFile whole = GgufFile::fromBytes(full);
  const TensorInfo& last = whole.tensors().back();
  const uint64_t needed = whole.dataOffset() + last.offset + last.nbytes;
  for (size_t len = 0; len < full.size(); ++len) {
    std::vector<uint8_t> prefix(full.begin(), full.begin() + len);
    try {
      const GgufFile f = GgufFile::fromBytes(std::move(prefix));
      // Only the trailing padding after the last tensor is optional.
      ASSERT_TRUE(len >= needed) << "prefix of " << len << " bytes opened";
    } catch (const GgufError&) {
      ASSERT_TRUE(len < needed) << "prefix of " << len << " bytes rejected";
    }
  }
}

TEST(GgufRobustness, byteFlipsNeverCrash) {
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
        for (const TensorInfo& t : f.tensors()) ASSERT_EQ(f.tensorData(t).size(), size_t(t.nbytes));
        try {
          (void)moe::VocabData::fromGguf(f);
        } catch (const GgufError&) {
        }
        ++opened;
      } catch (const GgufError&) {
      }
    }
  }
  ASSERT_TRUE(opened > 0);  // flips inside tensor data must still open
}

TEST(GgufRobustness, openReportsFileErrors) {
  ASSERT_TRUE(throwsWith([] { GgufFile::open("/nonexistent/x.gguf"); }, "/nonexistent/x.gguf: cannot open"));
  ASSERT_TRUE(throwsWith([] { GgufFile::open(MOECHAT_TEST_DATA); }, "not a regular file"));
  ASSERT_TRUE(
      throwsWith([] { GgufFile::open(MOECHAT_TEST_DATA "/gguf_corpus/bad_empty_file.gguf"); }, "empty file"));
  ASSERT_TRUE(throwsWith([] { GgufFile::fromBytes({}); }, "truncated file: magic"));

  // A FIFO with no writer: opening it for reading must not wait for one. Tried in a
  // child, so that a wait shows as a failure (the alarm) rather than a stuck test.
  moe::test::TempDir dir;
  const std::string fifo = dir.file("model.gguf");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const pid_t child = fork();
  ASSERT_TRUE(child >= 0);
  if (child == 0) {
    alarm(30);
    _exit(throwsWith([&] { GgufFile::open(fifo); }, "not a regular file") ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "opening a FIFO waited for a writer";
  ASSERT_EQ(WEXITSTATUS(status), 0);
}

TEST(GgufRobustness, interopWithHuggingfaceParser) {
  // Cross-check with a third-party parser: tools/interop (npm ci --prefix tools/interop).
  const std::string node = findExecutable("node");
  const std::string interop = repoRoot() + "/tools/interop";
  if (node.empty()) GTEST_SKIP() << "node not found: install Node.js to run the GGUF interop check";
  if (!std::filesystem::is_directory(interop + "/node_modules/@huggingface/gguf")) {
    GTEST_SKIP()
        << "tools/interop/node_modules missing: run `npm ci --prefix tools/interop` to enable the interop "
           "check";
  }
  moe::test::TempDir dir;
  const std::string path = dir.file("interop.gguf");
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

  const auto proc = moe::test::runProgram({node, interop + "/gguf_dump.mjs", path}, 60);
  ASSERT_TRUE(proc.error.empty() && !proc.timed_out) << proc.error << (proc.timed_out ? "timed out" : "");
  ASSERT_TRUE(proc.exit_code == 0) << proc.err;
  JsonReader reader(proc.out);
  const std::optional<Json> doc = reader.read();
  ASSERT_TRUE(doc && doc->kind == Json::Object) << "gguf_dump.mjs output: " << reader.error();
  const Json& theirs = *doc;

  ASSERT_EQ(theirs["architecture"].toString(), *ours.getString("general.architecture"));
  ASSERT_EQ(theirs["version"].toInt(), 3);
  ASSERT_EQ(theirs["tensor_data_offset"].toU64(), ours.dataOffset());
  const Json& tensors = theirs["tensors"];
  ASSERT_EQ(size_t(tensors.size()), ours.tensors().size());
  for (size_t i = 0; i < ours.tensors().size(); ++i) {
    const TensorInfo& t = ours.tensors()[i];
    const Json& j = tensors[i];
    ASSERT_EQ(j["name"].toString(), t.name);
    ASSERT_EQ(uint32_t(j["dtype"].toInt()), static_cast<uint32_t>(t.type));
    ASSERT_EQ(j["offset"].toU64(), t.offset);
    const Json& shape = j["shape"];
    ASSERT_EQ(size_t(shape.size()), t.dims.size());
    for (size_t d = 0; d < shape.size(); ++d) ASSERT_EQ(shape[d].toU64(), t.dims[d]);
  }
  const Json& meta = theirs["metadata"];
  ASSERT_EQ(size_t(meta.size()), ours.metadata().size());
  for (const KeyValue& kv : ours.metadata()) {
    const Json& j = meta[kv.key];
    ASSERT_TRUE(!j.isEmptyObject()) << kv.key;
    ASSERT_EQ(uint32_t(j["type"].toInt()), static_cast<uint32_t>(kv.value.type));
    const Json& val = j["value"];
    if (const std::string* s = kv.value.asString()) {
      ASSERT_EQ(val.toString(), *s);
    } else if (const auto* arr = kv.value.asArray()) {
      ASSERT_EQ(uint32_t(j["sub_type"].toInt()), static_cast<uint32_t>(kv.value.array_type));
      ASSERT_EQ(size_t(val.kind == Json::Array ? val.size() : 0), arr->size());
    } else if (kv.value.type == ValueType::U64 || kv.value.type == ValueType::I64) {
      ASSERT_EQ(val.toString(), kv.value.type == ValueType::U64 ? std::to_string(*kv.value.asUint())
                                                                : std::to_string(*kv.value.asInt()));
    } else if (auto b = kv.value.asBool()) {
      ASSERT_EQ(val.toBool(), *b);
    } else {
      ASSERT_DOUBLE_EQ(val.toDouble(), *kv.value.asFloat());
    }
  }
}

// A file whose header (metadata and tensor infos) the third-party writer of
// @huggingface/gguf serialised (tools/interop/gguf_rewrite.mjs, the code behind
// the Hugging Face hub's GGUF metadata editor): it opens, every tensor's bytes are
// where they were, and the engine computes the same logits as from our own file.
TEST(GgufRobustness, runsModelsWhoseHeaderAThirdPartyWrote) {
  const std::string node = findExecutable("node");
  const std::string interop = repoRoot() + "/tools/interop";
  if (node.empty()) GTEST_SKIP() << "node not found: install Node.js to run the GGUF interop check";
  if (!std::filesystem::is_directory(interop + "/node_modules/@huggingface/gguf"))
    GTEST_SKIP() << "tools/interop/node_modules missing: run `npm ci --prefix tools/interop`";
  moe::test::TempDir dir;
  for (const char* arch : {"llama", "qwen2moe", "qwen3moe", "deepseek", "olmoe"}) {
    SCOPED_TRACE(arch);
    const std::string original = std::string(MOECHAT_TEST_DATA) + "/golden/" + arch + ".gguf";
    const std::string rewritten = dir.file(std::string(arch) + ".gguf");
    const auto proc = moe::test::runProgram({node, interop + "/gguf_rewrite.mjs", original, rewritten}, 60);
    ASSERT_TRUE(proc.error.empty() && !proc.timed_out) << proc.error << (proc.timed_out ? "timed out" : "");
    ASSERT_TRUE(proc.exit_code == 0) << proc.err;

    GgufFile ours = GgufFile::open(original);
    GgufFile theirs = GgufFile::open(rewritten);
    ASSERT_EQ(*theirs.getString("general.description"), std::string("header rewritten by @huggingface/gguf"));
    ASSERT_EQ(theirs.metadata().size(), ours.metadata().size() + 1);
    ASSERT_EQ(theirs.tensors().size(), ours.tensors().size());
    for (const auto& t : ours.tensors()) {
      const TensorInfo* u = theirs.findTensor(t.name);
      ASSERT_TRUE(u);
      ASSERT_EQ(u->dims, t.dims);
      const auto a = ours.tensorData(t), b = theirs.tensorData(*u);
      ASSERT_TRUE(a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin()));
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
    ASSERT_TRUE(logits[0] == logits[1]) << arch;
  }
}
