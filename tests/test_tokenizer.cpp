// Tokenizers (inference/tokenizer/): the protobuf writer, GPT-2's byte table,
// pre-tokenizer splits against hand-worked splits of the published regexes,
// ids against independent implementations (the sentencepiece library itself;
// tools/reference_bpe.py), round trips, special tokens, the synthetic
// vocabulary builders and the chat templates.
#include <QtTest/QtTest>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "inference/tokenizer/bpe_tokenizer.h"
#include "inference/tokenizer/chat_template.h"
#include "inference/tokenizer/protobuf_wire.h"
#include "inference/tokenizer/spm_tokenizer.h"
#include "inference/tokenizer/tokenizer.h"
#include "models/synthetic_model.h"
#include "models/synthetic_vocab.h"

using namespace moe;

namespace {

std::string dataPath(const std::string& name) {
  return std::string(MOECHAT_TEST_DATA) + "/tokenizer/" + name;
}

std::vector<std::string> readLines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> splitTabs(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
    out.push_back(line.substr(start, tab - start));
  out.push_back(line.substr(start));
  return out;
}

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<int32_t> parseIds(const std::string& s) {
  std::vector<int32_t> ids;
  std::istringstream in(s);
  for (int32_t id; in >> id;) ids.push_back(id);
  return ids;
}

QString show(const std::vector<int32_t>& ids) {
  QStringList parts;
  for (int32_t id : ids) parts << QString::number(id);
  return parts.join(' ');
}

QString show(const std::vector<std::string_view>& pieces) {
  QStringList parts;
  for (auto p : pieces)
    parts << QString::fromUtf8(p.data(), static_cast<qsizetype>(p.size()))
                 .replace("\n", "\\n")
                 .replace("\r", "\\r");
  return "[" + parts.join("|") + "]";
}

// tests/data/tokenizer/spm_small.vocab.txt (tools/gen_spm_fixture.py) as VocabData.
VocabData loadSpmFixture() {
  VocabData v;
  v.model = "llama";
  for (const auto& line : readLines(dataPath("spm_small.vocab.txt"))) {
    const auto f = splitTabs(line);
    v.token_types.push_back(std::stoi(f.at(0)));
    v.scores.push_back(std::stof(f.at(1)));
    v.tokens.push_back(unhex(f.at(2)));
  }
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_space_prefix = true;
  v.remove_extra_whitespaces = false;
  return v;
}

// tests/data/tokenizer/gpt2_small.{vocab,merges}.txt (tools/reference_bpe.py).
VocabData loadGpt2Fixture(const std::string& pre) {
  VocabData v;
  v.model = "gpt2";
  v.pre = pre;
  for (const auto& line : readLines(dataPath("gpt2_small.vocab.txt"))) {
    const auto f = splitTabs(line);
    v.token_types.push_back(std::stoi(f.at(0)));
    v.tokens.push_back(f.at(1));
  }
  v.merges = readLines(dataPath("gpt2_small.merges.txt"));
  v.add_bos = false;
  v.eos_id = static_cast<int32_t>(v.tokens.size()) - 1;  // <|im_end|>
  return v;
}

const std::vector<std::string> kRoundTripSamples = {
    "Hello, world!",
    "",
    " ",
    "   three leading spaces, trailing two  ",
    "def f(x):\n\treturn x * 2\n\n\nint main() {\n    return 0;\n}\n",
    "multiple     spaces\tand\t\ttabs\r\nwindows line",
    "Grüße aus Köln, ça va? ¿Qué tal?",
    "中文测试，你好世界！日本語もテスト。한국어",
    "emoji 😀🚀 ❤️ 👍🏽 family 👨‍👩‍👧",
    "Привет, мир! Ελληνικά",
    "numbers 1234567890 3.14159 -42",
    "<|im_start|> looks special but parse_special is off",
};

int32_t idOf(const Tokenizer& t, const std::string& piece) {
  for (int32_t i = 0; i < t.vocabSize(); ++i)
    if (t.piece(i) == piece) return i;
  return -1;
}

}  // namespace

class TestTokenizer : public QObject {
  Q_OBJECT

 private slots:
  // ---- protobuf wire writer ----
  void protobufWire() {
    pb::WireWriter w;
    w.writeVarintField(1, 300);  // tag 0x08, varint 300 = AC 02 (protobuf encoding guide example)
    QCOMPARE(w.bytes(), std::string("\x08\xAC\x02", 3));
    pb::WireWriter n;
    n.writeInt32Field(43, -1);  // tag (43<<3)|0 = 344 = D8 02; -1 as ten bytes
    QCOMPARE(n.bytes(), std::string("\xD8\x02\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01", 12));
    pb::WireWriter f;
    f.writeFloatField(2, 1.0f);  // tag 0x15, 0x3F800000 little-endian
    QCOMPARE(f.bytes(), std::string("\x15\x00\x00\x80\x3F", 5));
    pb::WireWriter s;
    s.writeBytesField(1, "identity");
    QCOMPARE(s.bytes(), std::string("\x0A\x08identity", 10));
  }

  // ---- GPT-2 byte table ----
  void gpt2ByteTable() {
    QCOMPARE(uint32_t(gpt2::byteToCodepoint('!')), 0x21u);
    QCOMPARE(uint32_t(gpt2::byteToCodepoint('~')), 0x7Eu);
    QCOMPARE(uint32_t(gpt2::byteToCodepoint(0x00)), 0x100u);
    QCOMPARE(uint32_t(gpt2::byteToCodepoint(' ')), 0x120u);   // 'Ġ'
    QCOMPARE(uint32_t(gpt2::byteToCodepoint('\n')), 0x10Au);  // 'Ċ'
    QCOMPARE(uint32_t(gpt2::byteToCodepoint(0x7F)), 0x121u);
    QCOMPARE(uint32_t(gpt2::byteToCodepoint(0xA0)), 0x142u);  // 'ł'
    QCOMPARE(uint32_t(gpt2::byteToCodepoint(0xA1)), 0xA1u);
    QCOMPARE(uint32_t(gpt2::byteToCodepoint(0xAD)), 0x143u);  // 'Ń'
    QCOMPARE(uint32_t(gpt2::byteToCodepoint(0xFF)), 0xFFu);
    QCOMPARE(gpt2::byteToUtf8(' '), std::string("\xC4\xA0"));
    for (int b = 0; b < 256; ++b) QCOMPARE(gpt2::codepointToByte(gpt2::byteToCodepoint(uint8_t(b))), b);
    QCOMPARE(gpt2::codepointToByte(0x144), -1);
    std::string all, back;
    for (int b = 0; b < 256; ++b) all.push_back(char(b));
    QVERIFY(gpt2::byteLevelToBytes(gpt2::bytesToByteLevel(all), back));
    QCOMPARE(back, all);
  }

  // ---- pre-tokenizers: expected splits worked by hand from the published regexes ----
  void preTokenizerSplits_data() {
    QTest::addColumn<QString>("pre");
    QTest::addColumn<QString>("text");
    QTest::addColumn<QStringList>("pieces");
    auto row = [](const char* name, const char* pre, const char* text, QStringList pieces) {
      QTest::newRow(name) << pre << QString::fromUtf8(text) << pieces;
    };
    // Contractions: case-insensitive in qwen2/llama3, case-sensitive in GPT-2.
    row("qwen2 contraction", "qwen2", "I'm HERE'S it's", {"I", "'m", " HERE", "'S", " it", "'s"});
    row("llama3 contraction", "llama-bpe", "DON'T", {"DON", "'T"});
    row("gpt2 contraction case", "gpt2", "DON'T don't", {"DON", "'", "T", " don", "'t"});
    // Digits: single in qwen2, groups of up to three in llama3, runs in GPT-2.
    row("qwen2 digits", "qwen2", "x 12345", {"x", " ", "1", "2", "3", "4", "5"});
    row("llama3 digits", "llama-bpe", "abc1234567def", {"abc", "123", "456", "7", "def"});
    row("gpt2 digits", "gpt2", "x 12345", {"x", " 12345"});
    // A punctuation mark (or space) glues onto the following letters in qwen2/llama3.
    row("qwen2 punct+letters", "qwen2", ".hello world!!!", {".hello", " world", "!!!"});
    row("gpt2 punct+letters", "gpt2", ".hello world!!!", {".", "hello", " world", "!!!"});
    // Newlines: punctuation takes trailing newlines; \s*[\r\n]+ keeps spaces before them.
    // A tab, like any non-letter non-digit except \r\n, glues onto the next word.
    row("qwen2 code", "qwen2", "x = 1;\n\ty", {"x", " =", " ", "1", ";\n", "\ty"});
    row("llama3 spaces+newline", "llama-bpe", "x  \n  y", {"x", "  \n", " ", " y"});
    row("qwen2 blank lines", "qwen2", "a\n\nb\r\nc", {"a", "\n\n", "b", "\r\n", "c"});
    row("gpt2 newline", "gpt2", "};\n", {"};", "\n"});
    row("llama3 newline after punct", "llama-bpe", "};\n", {"};\n"});
    // Non-Latin letters are \p{L}; fullwidth comma (Po) glues to the next letters.
    row("qwen2 cjk", "qwen2", "你好，世界", {"你好", "，世界"});
    row("gpt2 cjk", "gpt2", "你好，世界", {"你好", "，", "世界"});
    row("llama3 cyrillic", "llama-bpe", "Привет мир", {"Привет", " мир"});
    // Trailing spaces: \s+(?!\S) leaves the last space to the next word.
    row("gpt2 spaces", "gpt2", "a   b", {"a", "  ", " b"});
    // DeepSeek LLM: sequence of isolated splits.
    row("deepseek digits", "deepseek-llm", "abc 123 你好", {"abc", " ", "123", " ", "你好"});
  }
  void preTokenizerSplits() {
    QFETCH(QString, pre);
    QFETCH(QString, text);
    QFETCH(QStringList, pieces);
    PreTokenizer p(pre.toStdString());
    QVERIFY(p.warning().empty());
    const std::string utf8 = text.toStdString();
    const auto got = p.split(utf8);
    std::vector<std::string_view> expected_views;
    std::vector<std::string> expected;
    for (const auto& s : pieces) expected.push_back(s.toStdString());
    for (const auto& s : expected) expected_views.push_back(s);
    QCOMPARE(show(got), show(expected_views));
  }

  void unknownPreFallsBackWithWarning() {
    PreTokenizer p("no-such-pre");
    QCOMPARE(p.name(), std::string("default"));
    QVERIFY(!p.warning().empty());
    BpeTokenizer t(loadGpt2Fixture("no-such-pre"));
    QVERIFY(!t.preTokenizer().warning().empty());
  }

  void preTokenizerKeepsInvalidUtf8() {
    PreTokenizer p("qwen2");
    const std::string text = "ab\xFF\xFE cd \xC3";
    std::string joined;
    for (auto piece : p.split(text)) joined += piece;
    QCOMPARE(joined, text);
  }

  // ---- ids against independent implementations ----
  void bpeMatchesReference() {
    int checked = 0;
    for (const auto& line : readLines(dataPath("gpt2_small.expected.txt"))) {
      const auto f = splitTabs(line);
      BpeTokenizer t(loadGpt2Fixture(f.at(0)));
      const std::string text = unhex(f.at(1));
      const auto expected = parseIds(f.at(2));
      QVERIFY2(t.encode(text, false, false) == expected,
               qPrintable(QString::fromStdString(f.at(0) + ": " + text) + " got " +
                          show(t.encode(text, false, false)) + " expected " + show(expected)));
      QCOMPARE(t.decode(expected), text);
      ++checked;
    }
    QCOMPARE(checked, 30);
  }

  void spmMatchesSentencepieceLibrary() {
    const SpmTokenizer t(loadSpmFixture());
    int checked = 0;
    for (const auto& line : readLines(dataPath("spm_small.expected.txt"))) {
      const auto f = splitTabs(line);
      const std::string text = unhex(f.at(0));
      const auto expected = parseIds(f.size() > 1 ? f.at(1) : "");
      const auto got = t.encode(text, false, false);
      QVERIFY2(got == expected, qPrintable(QString::fromStdString(text) + " got " + show(got) + " expected " +
                                           show(expected)));
      QCOMPARE(t.decode(got), text);
      ++checked;
    }
    QCOMPARE(checked, 13);
  }

  void spmTokenBytes() {
    const SpmTokenizer t(loadSpmFixture());
    QCOMPARE(t.tokenBytes(1), std::string());            // <s>
    QCOMPARE(t.tokenBytes(3 + 0x41), std::string("A"));  // <0x41>
    QCOMPARE(t.tokenBytes(3 + 0x0A), std::string("\n"));
    QCOMPARE(t.tokenBytes(idOf(t, "\xE2\x96\x81the")), std::string(" the"));
    QCOMPARE(t.tokenBytes(0), std::string(" \xE2\x81\x87 "));
  }

  // ---- round trips on the synthetic vocabularies (byte fallback for what is not in them) ----
  void roundTrips_data() {
    QTest::addColumn<QString>("kind");
    for (const char* k : {"spm", "qwen2", "llama-bpe", "olmo", "deepseek-llm", "gpt2"})
      QTest::newRow(k) << QString(k);
  }
  void roundTrips() {
    QFETCH(QString, kind);
    const VocabData v = kind == "spm" ? buildSpmVocab(512) : buildGpt2Vocab(512, kind.toStdString());
    const auto t = Tokenizer::fromVocab(v);
    for (const auto& s : kRoundTripSamples) {
      const auto ids = t->encode(s, t->addBosDefault(), false);
      QVERIFY2(t->decode(ids) == s,
               qPrintable(QString::fromStdString(s) + " -> " + QString::fromStdString(t->decode(ids))));
      if (t->addBosDefault() && t->bos() >= 0) QCOMPARE(ids.front(), t->bos());
    }
  }

  void spmEncodeUsesPiecesAndBytes() {
    const auto t = Tokenizer::fromVocab(buildSpmVocab(512));
    const auto ids = t->encode("the", false, false);
    QVERIFY(!ids.empty());
    QVERIFY(t->piece(ids[0]).rfind("\xE2\x96\x81", 0) == 0);  // dummy prefix "▁"
    // A character outside the vocabulary comes out as UTF-8 byte pieces.
    const auto emoji = t->encode("\xF0\x9F\xA6\x84", false, false);  // 🦄
    QVERIFY(emoji.size() >= 4);
    int bytes = 0;
    for (int32_t id : emoji) bytes += t->type(id) == TokenType::Byte;
    QCOMPARE(bytes, 4);
  }

  // ---- special tokens ----
  void specialTokensGpt2() {
    const auto t = Tokenizer::fromVocab(buildGpt2Vocab(400, "qwen2"));
    const int32_t im_start = idOf(*t, "<|im_start|>"), im_end = idOf(*t, "<|im_end|>");
    const std::string text = "<|im_start|>user\nhi<|im_end|>\n";
    const auto ids = t->encode(text, false, true);
    QCOMPARE(ids.front(), im_start);
    QVERIFY(std::find(ids.begin(), ids.end(), im_end) != ids.end());
    QCOMPARE(t->decode(ids), std::string("user\nhi\n"));  // control tokens decode to nothing
    const auto plain = t->encode(text, false, false);
    QVERIFY(std::find(plain.begin(), plain.end(), im_start) == plain.end());
    QCOMPARE(t->decode(plain), text);
    QVERIFY(!t->addBosDefault());
    QCOMPARE(t->encode("x", true, false).front(), t->bos());
  }

  void specialTokenLongestMatch() {
    SpecialTokenMatcher m;
    m.add("<|a", 7);
    m.add("<|a|>", 8);
    const auto f = m.split("x<|a|>y<|a z");
    QCOMPARE(int(f.size()), 5);
    QCOMPARE(f[0].text, std::string_view("x"));
    QCOMPARE(f[1].id, 8);
    QCOMPARE(f[2].text, std::string_view("y"));
    QCOMPARE(f[3].id, 7);
    QCOMPARE(f[4].text, std::string_view(" z"));
    QCOMPARE(f[4].offset, size_t(10));
  }

  void spmDummyPrefixOnlyAtTextStart() {
    const auto t = Tokenizer::fromVocab(buildSpmVocab(512));
    const std::string marker = "\xE2\x96\x81";
    // At text start the fragment gets the prefix; after a special token it does not.
    const auto a = t->encode("the</s>the", false, true);
    QVERIFY(t->piece(a.front()).rfind(marker, 0) == 0);
    const auto eos_at = std::find(a.begin(), a.end(), t->eos());
    QVERIFY(eos_at != a.end() && eos_at + 1 != a.end());
    QVERIFY(t->piece(*(eos_at + 1)).rfind(marker, 0) != 0);
    const auto b = t->encode("<s>the", false, true);
    QCOMPARE(b.front(), t->bos());
    QVERIFY(t->piece(b[1]).rfind(marker, 0) != 0);
    // Without parse_special "</s>" is text.
    const auto c = t->encode("</s>", false, false);
    QVERIFY(std::find(c.begin(), c.end(), t->eos()) == c.end());
    QCOMPARE(t->decode(c), std::string("</s>"));
  }

  void endOfGeneration() {
    const auto q = Tokenizer::fromVocab(buildGpt2Vocab(400, "qwen2"));
    QVERIFY(q->isEndOfGeneration(idOf(*q, "<|im_end|>")));
    QVERIFY(q->isEndOfGeneration(idOf(*q, "<|endoftext|>")));
    QVERIFY(!q->isEndOfGeneration(idOf(*q, "<|im_start|>")));
    QVERIFY(!q->isEndOfGeneration(q->encode("a", false, false).front()));
    QVERIFY(!q->isEndOfGeneration(-1));
    const auto s = Tokenizer::fromVocab(buildSpmVocab(400));
    QVERIFY(s->isEndOfGeneration(2));
    QVERIFY(!s->isEndOfGeneration(1));
    const auto d = Tokenizer::fromVocab(buildGpt2Vocab(400, "deepseek-llm"));
    QVERIFY(d->isEndOfGeneration(d->eos()));
    QCOMPARE(d->piece(d->eos()), std::string("<\xEF\xBD\x9C"
                                             "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"));
  }

  // ---- synthetic vocabulary builders ----
  void syntheticSpmVocab() {
    const VocabData v = buildSpmVocab(320);
    QCOMPARE(int(v.tokens.size()), 320);
    QCOMPARE(v.scores.size(), v.tokens.size());
    QCOMPARE(v.token_types.size(), v.tokens.size());
    QCOMPARE(v.tokens[0], std::string("<unk>"));
    QCOMPARE(v.token_types[0], 2);
    QCOMPARE(v.token_types[1], 3);
    QCOMPARE(v.tokens[3 + 0xAB], std::string("<0xAB>"));
    QCOMPARE(v.token_types[3 + 0xAB], 6);
    QCOMPARE(v.bos_id, 1);
    QCOMPARE(v.eos_id, 2);
    QCOMPARE(v.unk_id, 0);
    QVERIFY(v.add_bos);
    QVERIFY(v.tokens[259].rfind("\xE2\x96\x81", 0) == 0 || v.tokens[259].size() > 1);  // a learned piece
    QCOMPARE(v.scores[259], -0.0f);
    const VocabData again = buildSpmVocab(320);
    QCOMPARE(again.tokens, v.tokens);
    // Padding with unused pieces when the corpus runs out of merges.
    const VocabData big = buildSpmVocab(32000);
    QCOMPARE(int(big.tokens.size()), 32000);
    QCOMPARE(big.token_types.back(), 5);
    QVERIFY(Tokenizer::fromVocab(big)->encode("hello", true, false).size() >= 2);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, buildSpmVocab(100));
  }

  void syntheticGpt2Vocab() {
    const VocabData v = buildGpt2Vocab(400, "qwen2");
    QCOMPARE(int(v.tokens.size()), 400);
    QCOMPARE(v.pre, std::string("qwen2"));
    QCOMPARE(v.tokens[' '], std::string("\xC4\xA0"));
    QCOMPARE(v.tokens[397], std::string("<|endoftext|>"));
    QCOMPARE(v.tokens[398], std::string("<|im_start|>"));
    QCOMPARE(v.tokens[399], std::string("<|im_end|>"));
    QCOMPARE(v.token_types[399], 3);
    QCOMPARE(v.bos_id, 397);
    QCOMPARE(v.eos_id, 399);
    QCOMPARE(v.eot_id, 399);
    QVERIFY(!v.add_bos);
    QVERIFY(!v.merges.empty());
    // Every merge's parts and result are tokens, so each can fire.
    std::set<std::string> tokens(v.tokens.begin(), v.tokens.end());
    for (const auto& m : v.merges) {
      const auto sp = m.find(' ');
      QVERIFY(tokens.count(m.substr(0, sp)) && tokens.count(m.substr(sp + 1)) &&
              tokens.count(m.substr(0, sp) + m.substr(sp + 1)));
    }
    const BpeTokenizer t(v);
    QCOMPARE(t.mergeCount(), v.merges.size());
    // Common words come out as few tokens.
    QVERIFY(t.encode(" the", false, false).size() == 1);
    const VocabData big = buildGpt2Vocab(151936, "qwen2");
    QCOMPARE(int(big.tokens.size()), 151936);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, buildGpt2Vocab(200, "qwen2"));
  }

  void bpeIsFastEnough() {
    const auto t = Tokenizer::fromVocab(buildGpt2Vocab(2000, "qwen2"));
    std::string text;
    for (int i = 0; i < 2000; ++i)
      text += "The quick brown fox " + std::to_string(i) + " jumps over the lazy dog.\n";
    text += std::string(5000, ' ') + "x";  // one long whitespace word
    const auto start = std::chrono::steady_clock::now();
    const auto ids = t->encode(text, false, false);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    QCOMPARE(t->decode(ids), text);
    qInfo("encoded %zu bytes into %zu tokens in %.1f ms", text.size(), ids.size(), ms);
    QVERIFY(ms < 5000);
  }

  // ---- dispatch and validation ----
  void fromVocabValidates() {
    VocabData v = buildGpt2Vocab(300, "qwen2");
    v.model = "bert";
    QVERIFY_THROWS_EXCEPTION(TokenizerError, Tokenizer::fromVocab(v));
    v = buildGpt2Vocab(300, "qwen2");
    v.eos_id = 300;
    QVERIFY_THROWS_EXCEPTION(TokenizerError, Tokenizer::fromVocab(v));
    v = buildSpmVocab(300);
    v.token_types.pop_back();
    QVERIFY_THROWS_EXCEPTION(TokenizerError, Tokenizer::fromVocab(v));
    v = buildSpmVocab(300);
    v.token_types[0] = 1;
    v.unk_id = -1;  // no unknown piece at all: sentencepiece needs one
    QVERIFY_THROWS_EXCEPTION(TokenizerError, Tokenizer::fromVocab(v));
    v = buildSpmVocab(300);
    v.tokens[300 - 1] = v.tokens[300 - 2];  // a duplicate piece is tolerated (made unused)
    QCOMPARE(Tokenizer::fromVocab(v)->vocabSize(), 300);
  }

  // Through GGUF metadata (VocabData::writeTo / fromGguf, written elsewhere).
  void fromGgufRoundTrip_data() {
    QTest::addColumn<QString>("kind");
    for (const char* k : {"spm", "qwen2", "deepseek-llm"}) QTest::newRow(k) << QString(k);
  }
  void fromGgufRoundTrip() {
    QFETCH(QString, kind);
    const VocabData v = kind == "spm" ? buildSpmVocab(400) : buildGpt2Vocab(400, kind.toStdString());
    gguf::GgufWriter w;
    w.setString("general.architecture", "llama");
    v.writeTo(w);
    const auto viaFile = Tokenizer::fromGguf(gguf::GgufFile::fromBytes(w.toBytes()));
    const auto direct = Tokenizer::fromVocab(v);
    for (const auto& s : kRoundTripSamples)
      QCOMPARE(viaFile->encode(s, true, true), direct->encode(s, true, true));
    QCOMPARE(viaFile->eos(), direct->eos());
    QCOMPARE(viaFile->bos(), direct->bos());
    QCOMPARE(viaFile->addBosDefault(), direct->addBosDefault());
  }

  void demoModelTokenizer() {
    const auto file = gguf::GgufFile::fromBytes(synth::demoModelBytes());
    const auto t = Tokenizer::fromGguf(file);
    const std::string prompt = applyChatTemplate(chatFamilyFor(file), {{"user", "Hello there"}}, true);
    QCOMPARE(t->decode(t->encode(prompt, t->addBosDefault(), false)), prompt);
  }

  // ---- chat templates ----
  void chatTemplates() {
    const std::vector<ChatMessage> conv = {
        {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Why?"}};
    QCOMPARE(applyChatTemplate(ChatFamily::Mixtral, conv, true),
             std::string("[INST] Be brief.\n\nHi [/INST]Hello.</s>[INST] Why? [/INST]"));
    QCOMPARE(applyChatTemplate(ChatFamily::ChatML, conv, true),
             std::string("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                         "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n"
                         "<|im_start|>assistant\n"));
    QCOMPARE(applyChatTemplate(ChatFamily::ChatML, {{"user", "Hi"}}, false),
             std::string("<|im_start|>user\nHi<|im_end|>\n"));
    QCOMPARE(applyChatTemplate(ChatFamily::DeepSeek, conv, true),
             std::string("Be brief.\n\nUser: Hi\n\nAssistant: Hello.<\xEF\xBD\x9C"
                         "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"
                         "User: Why?\n\nAssistant:"));
    QCOMPARE(applyChatTemplate(ChatFamily::Olmoe, conv, true),
             std::string("<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\nHello.<|endoftext|>\n"
                         "<|user|>\nWhy?\n<|assistant|>\n"));
    QCOMPARE(applyChatTemplate(ChatFamily::Mixtral, {{"user", "Hi"}}, true),
             std::string("[INST] Hi [/INST]"));
    QCOMPARE(chatStopStrings(ChatFamily::ChatML).front(), std::string("<|im_end|>"));
    QCOMPARE(std::string(chatFamilyName(ChatFamily::Olmoe)), std::string("olmoe"));
    QCOMPARE(applyChatTemplate(ChatFamily::Glm, conv, true),
             std::string("[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi<|assistant|>\nHello.<|user|>\nWhy?"
                         "<|assistant|>"));
    QCOMPARE(chatStopStrings(ChatFamily::Glm).front(), std::string("<|user|>"));
    const std::string h = applyChatTemplate(ChatFamily::Harmony, conv, true);
    QVERIFY(h.rfind("<|start|>system<|message|>", 0) == 0);
    QVERIFY(h.find("<|start|>developer<|message|># Instructions\n\nBe brief.<|end|>") != std::string::npos);
    QVERIFY(
        h.find("<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello.<|end|>"
               "<|start|>user<|message|>Why?<|end|><|start|>assistant") != std::string::npos);
    const std::string prompt = "<|start|>assistant";
    QVERIFY(h.size() >= prompt.size() && h.compare(h.size() - prompt.size(), prompt.size(), prompt) == 0);
    QCOMPARE(chatStopStrings(ChatFamily::Harmony).front(), std::string("<|return|>"));
  }

  void chatFamilyFromGguf_data() {
    QTest::addColumn<QString>("arch");
    QTest::addColumn<QString>("tmpl");
    QTest::addColumn<int>("family");
    QTest::newRow("llama") << "llama"
                           << "" << int(ChatFamily::Mixtral);
    QTest::newRow("qwen2moe") << "qwen2moe"
                              << "" << int(ChatFamily::ChatML);
    QTest::newRow("deepseek2") << "deepseek2"
                               << "" << int(ChatFamily::DeepSeek);
    QTest::newRow("olmoe") << "olmoe"
                           << "" << int(ChatFamily::Olmoe);
    QTest::newRow("glm4moe") << "glm4moe"
                             << "" << int(ChatFamily::Glm);
    QTest::newRow("gpt-oss") << "gpt-oss"
                             << "" << int(ChatFamily::Harmony);
    QTest::newRow("glm template") << "qwen2moe"
                                  << "[gMASK]<sop>{% for m in messages %}" << int(ChatFamily::Glm);
    QTest::newRow("llama with chatml template") << "llama"
                                                << "{{'<|im_start|>' + role}}" << int(ChatFamily::ChatML);
  }
  void chatFamilyFromGguf() {
    QFETCH(QString, arch);
    QFETCH(QString, tmpl);
    QFETCH(int, family);
    gguf::GgufWriter w;
    w.setString("general.architecture", arch.toStdString());
    if (!tmpl.isEmpty()) w.setString("tokenizer.chat_template", tmpl.toStdString());
    const auto file = gguf::GgufFile::fromBytes(w.toBytes());
    QCOMPARE(int(chatFamilyFor(file)), family);
  }

  // A chat prompt through the tokenizer: markers become single control ids.
  void chatPromptTokenizes() {
    const auto t = Tokenizer::fromVocab(buildGpt2Vocab(400, "qwen2"));
    const std::string prompt = applyChatTemplate(ChatFamily::ChatML, {{"user", "Hi"}}, true);
    const auto ids = t->encode(prompt, t->addBosDefault(), true);
    QCOMPARE(int(std::count(ids.begin(), ids.end(), idOf(*t, "<|im_start|>"))), 2);
    QCOMPARE(int(std::count(ids.begin(), ids.end(), idOf(*t, "<|im_end|>"))), 1);
  }
};

QTEST_APPLESS_MAIN(TestTokenizer)
#include "test_tokenizer.moc"
