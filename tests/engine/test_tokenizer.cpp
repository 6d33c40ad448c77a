// Tokenizers (inference/tokenizer/): the protobuf writer, GPT-2's byte table,
// pre-tokenizer splits against hand-worked splits of the published regexes,
// ids against independent implementations (the sentencepiece library itself;
// tools/reference_bpe.py), round trips, special tokens, the synthetic
// vocabulary builders and the chat templates.
#include <gtest/gtest.h>

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
#include "support/test_log.h"
#include "synth/synthetic_model.h"
#include "synth/synthetic_vocab.h"

using namespace moe;

namespace {

std::string dataPath(const std::string& name) {
  std::string path = MOECHAT_TEST_DATA;
  path += "/tokenizer/";
  return path + name;
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

std::string show(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) out += (out.empty() ? "" : " ") + std::to_string(id);
  return out;
}

std::string show(const std::vector<std::string_view>& pieces) {
  std::string out = "[";
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i > 0) out += "|";
    for (char c : pieces[i]) out += c == '\n' ? "\\n" : c == '\r' ? "\\r" : std::string(1, c);
  }
  return out + "]";
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

// ---- protobuf wire writer ----
TEST(Tokenizer, protobufWire) {
  pb::WireWriter w;
  w.writeVarintField(1, 300);  // tag 0x08, varint 300 = AC 02 (protobuf encoding guide example)
  ASSERT_EQ(w.bytes(), std::string("\x08\xAC\x02", 3));
  pb::WireWriter n;
  n.writeInt32Field(43, -1);  // tag (43<<3)|0 = 344 = D8 02; -1 as ten bytes
  ASSERT_EQ(n.bytes(), std::string("\xD8\x02\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\x01", 12));
  pb::WireWriter f;
  f.writeFloatField(2, 1.0f);  // tag 0x15, 0x3F800000 little-endian
  ASSERT_EQ(f.bytes(), std::string("\x15\x00\x00\x80\x3F", 5));
  pb::WireWriter s;
  s.writeBytesField(1, "identity");
  ASSERT_EQ(s.bytes(), std::string("\x0A\x08identity", 10));
}

// ---- GPT-2 byte table ----
TEST(Tokenizer, gpt2ByteTable) {
  ASSERT_EQ(uint32_t(gpt2::byteToCodepoint('!')), 0x21u);
  ASSERT_EQ(uint32_t(gpt2::byteToCodepoint('~')), 0x7Eu);
  ASSERT_EQ(uint32_t(gpt2::byteToCodepoint(0x00)), 0x100u);
  ASSERT_EQ(uint32_t(gpt2::byteToCodepoint(' ')), 0x120u);   // 'Ġ'
  ASSERT_EQ(uint32_t(gpt2::byteToCodepoint('\n')), 0x10Au);  // 'Ċ'
  ASSERT_EQ(uint32_t(gpt2::byteToCodepoint(0x7F)), 0x121u);
  ASSERT_EQ(uint32_t(gpt2::byteToCodepoint(0xA0)), 0x142u);  // 'ł'
  ASSERT_EQ(uint32_t(gpt2::byteToCodepoint(0xA1)), 0xA1u);
  ASSERT_EQ(uint32_t(gpt2::byteToCodepoint(0xAD)), 0x143u);  // 'Ń'
  ASSERT_EQ(uint32_t(gpt2::byteToCodepoint(0xFF)), 0xFFu);
  ASSERT_EQ(gpt2::byteToUtf8(' '), std::string("\xC4\xA0"));
  for (int b = 0; b < 256; ++b) ASSERT_EQ(gpt2::codepointToByte(gpt2::byteToCodepoint(uint8_t(b))), b);
  ASSERT_EQ(gpt2::codepointToByte(0x144), -1);
  std::string all, back;
  for (int b = 0; b < 256; ++b) all.push_back(char(b));
  ASSERT_TRUE(gpt2::byteLevelToBytes(gpt2::bytesToByteLevel(all), back));
  ASSERT_EQ(back, all);
}

// ---- pre-tokenizers: expected splits worked by hand from the published regexes ----
TEST(Tokenizer, preTokenizerSplits) {
  struct Row {
    const char* name;
    const char* pre;
    const char* text;
    std::vector<std::string> pieces;
  };
  const std::vector<Row> rows = {
      // Contractions: case-insensitive in qwen2/llama3, case-sensitive in GPT-2.
      {"qwen2 contraction", "qwen2", "I'm HERE'S it's", {"I", "'m", " HERE", "'S", " it", "'s"}},
      {"llama3 contraction", "llama-bpe", "DON'T", {"DON", "'T"}},
      {"gpt2 contraction case", "gpt2", "DON'T don't", {"DON", "'", "T", " don", "'t"}},
      // Digits: single in qwen2, groups of up to three in llama3, runs in GPT-2.
      {"qwen2 digits", "qwen2", "x 12345", {"x", " ", "1", "2", "3", "4", "5"}},
      {"llama3 digits", "llama-bpe", "abc1234567def", {"abc", "123", "456", "7", "def"}},
      {"gpt2 digits", "gpt2", "x 12345", {"x", " 12345"}},
      // A punctuation mark (or space) glues onto the following letters in qwen2/llama3.
      {"qwen2 punct+letters", "qwen2", ".hello world!!!", {".hello", " world", "!!!"}},
      {"gpt2 punct+letters", "gpt2", ".hello world!!!", {".", "hello", " world", "!!!"}},
      // Newlines: punctuation takes trailing newlines; \s*[\r\n]+ keeps spaces before them.
      // A tab, like any non-letter non-digit except \r\n, glues onto the next word.
      {"qwen2 code", "qwen2", "x = 1;\n\ty", {"x", " =", " ", "1", ";\n", "\ty"}},
      {"llama3 spaces+newline", "llama-bpe", "x  \n  y", {"x", "  \n", " ", " y"}},
      {"qwen2 blank lines", "qwen2", "a\n\nb\r\nc", {"a", "\n\n", "b", "\r\n", "c"}},
      {"gpt2 newline", "gpt2", "};\n", {"};", "\n"}},
      {"llama3 newline after punct", "llama-bpe", "};\n", {"};\n"}},
      // Non-Latin letters are \p{L}; fullwidth comma (Po) glues to the next letters.
      {"qwen2 cjk", "qwen2", "你好，世界", {"你好", "，世界"}},
      {"gpt2 cjk", "gpt2", "你好，世界", {"你好", "，", "世界"}},
      {"llama3 cyrillic", "llama-bpe", "Привет мир", {"Привет", " мир"}},
      // Trailing spaces: \s+(?!\S) leaves the last space to the next word.
      {"gpt2 spaces", "gpt2", "a   b", {"a", "  ", " b"}},
      // DeepSeek LLM: sequence of isolated splits.
      {"deepseek digits", "deepseek-llm", "abc 123 你好", {"abc", " ", "123", " ", "你好"}},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    PreTokenizer p(row.pre);
    EXPECT_TRUE(p.warning().empty());
    const std::string utf8 = row.text;
    const auto got = p.split(utf8);
    std::vector<std::string_view> expected_views;
    for (const auto& s : row.pieces) expected_views.push_back(s);
    EXPECT_EQ(show(got), show(expected_views));
  }
}

// Qwen3.5's pre-tokenizer ("qwen35") against Qwen2's on text that tells them apart:
// combining marks (\p{M}) stay with their letters in qwen35 and are split off (or
// glued to the next word, or left in a punctuation run) in qwen2; elsewhere the two
// agree (single digits, case-insensitive contractions, CJK, whitespace runs). Worked
// by hand from the published patterns.
TEST(Tokenizer, qwen35PreTokenizerKeepsMarksWithLetters) {
  struct Row {
    const char* name;
    const char* text;
    std::vector<std::string> qwen2, qwen35;
  };
  const std::string acute = "\xCC\x81";  // U+0301 COMBINING ACUTE ACCENT (Mn)
  const std::vector<Row> rows = {
      // A decomposed e-acute: the mark is a punctuation run of its own in qwen2.
      {"decomposed latin", "cafe\xCC\x81 ok", {"cafe", acute, " ok"}, {"cafe" + acute, " ok"}},
      // Devanagari "hindi": ह ि न ् द ी, vowel signs and the virama are marks (Mc, Mn).
      // In qwen2 a mark is the optional non-letter before the next letters.
      {"devanagari",
       "\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D\xE0\xA4\xA6\xE0\xA5\x80",
       {"\xE0\xA4\xB9", "\xE0\xA4\xBF\xE0\xA4\xA8", "\xE0\xA5\x8D\xE0\xA4\xA6", "\xE0\xA5\x80"},
       {"\xE0\xA4\xB9\xE0\xA4\xBF\xE0\xA4\xA8\xE0\xA5\x8D\xE0\xA4\xA6\xE0\xA5\x80"}},
      // Thai "sawasdi": ส ว ั ส ด ี, two vowel marks (Mn).
      {"thai",
       "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5",
       {"\xE0\xB8\xAA\xE0\xB8\xA7", "\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94", "\xE0\xB8\xB5"},
       {"\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5"}},
      // A mark after punctuation: one punctuation run in qwen2; qwen35's runs exclude
      // marks, and a mark alone is a word.
      {"mark after punctuation", "!!\xCC\x81", {"!!" + acute}, {"!!", acute}},
      // A space then a mark then letters: qwen35 keeps all three together.
      {"space mark letters",
       " \xCC\x81"
       "a",
       {" " + acute, "a"},
       {" " + acute + "a"}},
      // Precomposed letters are letters in both.
      {"precomposed",
       "na\xC3\xAFve caf\xC3\xA9",
       {"na\xC3\xAFve", " caf\xC3\xA9"},
       {"na\xC3\xAFve", " caf\xC3\xA9"}},
      // Single digits in both (llama3 groups up to three, GPT-2 takes the run).
      {"digit runs",
       "x 12345 3.14",
       {"x", " ", "1", "2", "3", "4", "5", " ", "3", ".", "1", "4"},
       {"x", " ", "1", "2", "3", "4", "5", " ", "3", ".", "1", "4"}},
      // Contractions, case-insensitive in both.
      {"contractions",
       "I'm HERE'S it's",
       {"I", "'m", " HERE", "'S", " it", "'s"},
       {"I", "'m", " HERE", "'S", " it", "'s"}},
      // CJK: letters; the fullwidth comma glues to the next word in both.
      {"cjk",
       "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",
       {"\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C"},
       {"\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C"}},
      // Whitespace runs: the last space goes to the next word; newlines keep the spaces before them.
      {"whitespace",
       "a   b  \n\n\tc",
       {"a", "  ", " b", "  \n\n", "\tc"},
       {"a", "  ", " b", "  \n\n", "\tc"}},
  };
  const PreTokenizer qwen2("qwen2"), qwen35("qwen35");
  EXPECT_TRUE(qwen35.warning().empty());
  EXPECT_EQ(qwen35.name(), std::string("qwen35"));
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const std::string text = row.text;
    std::vector<std::string_view> want2(row.qwen2.begin(), row.qwen2.end()),
        want35(row.qwen35.begin(), row.qwen35.end());
    EXPECT_EQ(show(qwen2.split(text)), show(want2));
    EXPECT_EQ(show(qwen35.split(text)), show(want35));
  }
}

// MiniMax-M2's pre-tokenizer is o200k's (llama.cpp's llama-vocab.cpp maps "minimax-m2"
// to the regex of "gpt-4o"): cased words with their contractions, digits in threes.
TEST(Tokenizer, minimaxPreIsO200k) {
  const PreTokenizer minimax("minimax-m2"), o200k("gpt-4o");
  EXPECT_TRUE(minimax.warning().empty());
  EXPECT_EQ(minimax.name(), std::string("minimax-m2"));
  const std::string text = "HelloWorld don't 1234567 x\n\n  y";
  EXPECT_EQ(show(minimax.split(text)), show(o200k.split(text)));
  EXPECT_EQ(show(minimax.split(text)),
            show(std::vector<std::string_view>{"Hello", "World", " don't", " ", "123", "456", "7", " x",
                                               "\n\n", " ", " y"}));
}

TEST(Tokenizer, unknownPreFallsBackWithWarning) {
  PreTokenizer p("no-such-pre");
  ASSERT_EQ(p.name(), std::string("default"));
  ASSERT_TRUE(!p.warning().empty());
  BpeTokenizer t(loadGpt2Fixture("no-such-pre"));
  ASSERT_TRUE(!t.preTokenizer().warning().empty());
}

TEST(Tokenizer, preTokenizerKeepsInvalidUtf8) {
  PreTokenizer p("qwen2");
  const std::string text = "ab\xFF\xFE cd \xC3";
  std::string joined;
  for (auto piece : p.split(text)) joined += piece;
  ASSERT_EQ(joined, text);
}

// ---- ids against independent implementations ----
TEST(Tokenizer, bpeMatchesReference) {
  int checked = 0;
  for (const auto& line : readLines(dataPath("gpt2_small.expected.txt"))) {
    const auto f = splitTabs(line);
    BpeTokenizer t(loadGpt2Fixture(f.at(0)));
    const std::string text = unhex(f.at(1));
    const auto expected = parseIds(f.at(2));
    ASSERT_TRUE(t.encode(text, false, false) == expected) << f.at(0) + ": " + text + " got " +
                                                                 show(t.encode(text, false, false)) +
                                                                 " expected " + show(expected);
    ASSERT_EQ(t.decode(expected), text);
    ++checked;
  }
  ASSERT_EQ(checked, 30);
}

TEST(Tokenizer, spmMatchesSentencepieceLibrary) {
  const SpmTokenizer t(loadSpmFixture());
  int checked = 0;
  for (const auto& line : readLines(dataPath("spm_small.expected.txt"))) {
    const auto f = splitTabs(line);
    const std::string text = unhex(f.at(0));
    const auto expected = parseIds(f.size() > 1 ? f.at(1) : "");
    const auto got = t.encode(text, false, false);
    ASSERT_TRUE(got == expected) << text + " got " + show(got) + " expected " + show(expected);
    ASSERT_EQ(t.decode(got), text);
    ++checked;
  }
  ASSERT_EQ(checked, 13);
}

TEST(Tokenizer, spmTokenBytes) {
  const SpmTokenizer t(loadSpmFixture());
  ASSERT_EQ(t.tokenBytes(1), std::string());            // <s>
  ASSERT_EQ(t.tokenBytes(3 + 0x41), std::string("A"));  // <0x41>
  ASSERT_EQ(t.tokenBytes(3 + 0x0A), std::string("\n"));
  ASSERT_EQ(t.tokenBytes(idOf(t, "\xE2\x96\x81the")), std::string(" the"));
  ASSERT_EQ(t.tokenBytes(0), std::string(" \xE2\x81\x87 "));
}

// ---- round trips on the synthetic vocabularies (byte fallback for what is not in them) ----
// One row of roundTrips (a fatal failure ends the row, not the case).
static void checkRoundTrips(const std::string& kind) {
  const VocabData v = kind == "spm" ? buildSpmVocab(512) : buildGpt2Vocab(512, kind);
  const auto t = Tokenizer::fromVocab(v);
  for (const auto& s : kRoundTripSamples) {
    const auto ids = t->encode(s, t->addBosDefault(), false);
    ASSERT_TRUE(t->decode(ids) == s) << s + " -> " + t->decode(ids);
    if (t->addBosDefault() && t->bos() >= 0) {
      ASSERT_EQ(ids.front(), t->bos());
    }
  }
}

TEST(Tokenizer, roundTrips) {
  for (const char* k : {"spm", "qwen2", "qwen35", "llama-bpe", "olmo", "deepseek-llm", "gpt2"}) {
    SCOPED_TRACE(k);
    checkRoundTrips(k);
  }
}

TEST(Tokenizer, spmEncodeUsesPiecesAndBytes) {
  const auto t = Tokenizer::fromVocab(buildSpmVocab(512));
  const auto ids = t->encode("the", false, false);
  ASSERT_TRUE(!ids.empty());
  ASSERT_TRUE(t->piece(ids[0]).rfind("\xE2\x96\x81", 0) == 0);  // dummy prefix "▁"
  // A character outside the vocabulary comes out as UTF-8 byte pieces.
  const auto emoji = t->encode("\xF0\x9F\xA6\x84", false, false);  // 🦄
  ASSERT_TRUE(emoji.size() >= 4);
  int bytes = 0;
  for (int32_t id : emoji) bytes += t->type(id) == TokenType::Byte;
  ASSERT_EQ(bytes, 4);
}

// ---- special tokens ----
TEST(Tokenizer, specialTokensGpt2) {
  const auto t = Tokenizer::fromVocab(buildGpt2Vocab(400, "qwen2"));
  const int32_t im_start = idOf(*t, "<|im_start|>"), im_end = idOf(*t, "<|im_end|>");
  const std::string text = "<|im_start|>user\nhi<|im_end|>\n";
  const auto ids = t->encode(text, false, true);
  ASSERT_EQ(ids.front(), im_start);
  ASSERT_TRUE(std::find(ids.begin(), ids.end(), im_end) != ids.end());
  ASSERT_EQ(t->decode(ids), std::string("user\nhi\n"));  // control tokens decode to nothing
  const auto plain = t->encode(text, false, false);
  ASSERT_TRUE(std::find(plain.begin(), plain.end(), im_start) == plain.end());
  ASSERT_EQ(t->decode(plain), text);
  ASSERT_TRUE(!t->addBosDefault());
  ASSERT_EQ(t->encode("x", true, false).front(), t->bos());
}

TEST(Tokenizer, specialTokenLongestMatch) {
  SpecialTokenMatcher m;
  m.add("<|a", 7);
  m.add("<|a|>", 8);
  const auto f = m.split("x<|a|>y<|a z");
  ASSERT_EQ(int(f.size()), 5);
  ASSERT_EQ(f[0].text, std::string_view("x"));
  ASSERT_EQ(f[1].id, 8);
  ASSERT_EQ(f[2].text, std::string_view("y"));
  ASSERT_EQ(f[3].id, 7);
  ASSERT_EQ(f[4].text, std::string_view(" z"));
  ASSERT_EQ(f[4].offset, size_t(10));
}

TEST(Tokenizer, spmDummyPrefixOnlyAtTextStart) {
  const auto t = Tokenizer::fromVocab(buildSpmVocab(512));
  const std::string marker = "\xE2\x96\x81";
  // At text start the fragment gets the prefix; after a special token it does not.
  const auto a = t->encode("the</s>the", false, true);
  ASSERT_TRUE(t->piece(a.front()).rfind(marker, 0) == 0);
  const auto eos_at = std::find(a.begin(), a.end(), t->eos());
  ASSERT_TRUE(eos_at != a.end() && eos_at + 1 != a.end());
  ASSERT_TRUE(t->piece(*(eos_at + 1)).rfind(marker, 0) != 0);
  const auto b = t->encode("<s>the", false, true);
  ASSERT_EQ(b.front(), t->bos());
  ASSERT_TRUE(t->piece(b[1]).rfind(marker, 0) != 0);
  // Without parse_special "</s>" is text.
  const auto c = t->encode("</s>", false, false);
  ASSERT_TRUE(std::find(c.begin(), c.end(), t->eos()) == c.end());
  ASSERT_EQ(t->decode(c), std::string("</s>"));
}

TEST(Tokenizer, endOfGeneration) {
  const auto q = Tokenizer::fromVocab(buildGpt2Vocab(400, "qwen2"));
  ASSERT_TRUE(q->isEndOfGeneration(idOf(*q, "<|im_end|>")));
  ASSERT_TRUE(q->isEndOfGeneration(idOf(*q, "<|endoftext|>")));
  ASSERT_TRUE(!q->isEndOfGeneration(idOf(*q, "<|im_start|>")));
  ASSERT_TRUE(!q->isEndOfGeneration(q->encode("a", false, false).front()));
  ASSERT_TRUE(!q->isEndOfGeneration(-1));
  const auto s = Tokenizer::fromVocab(buildSpmVocab(400));
  ASSERT_TRUE(s->isEndOfGeneration(2));
  ASSERT_TRUE(!s->isEndOfGeneration(1));
  const auto d = Tokenizer::fromVocab(buildGpt2Vocab(400, "deepseek-llm"));
  ASSERT_TRUE(d->isEndOfGeneration(d->eos()));
  ASSERT_EQ(d->piece(d->eos()), std::string("<\xEF\xBD\x9C"
                                            "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"));
}

// ---- synthetic vocabulary builders ----
TEST(Tokenizer, syntheticSpmVocab) {
  const VocabData v = buildSpmVocab(320);
  ASSERT_EQ(int(v.tokens.size()), 320);
  ASSERT_EQ(v.scores.size(), v.tokens.size());
  ASSERT_EQ(v.token_types.size(), v.tokens.size());
  ASSERT_EQ(v.tokens[0], std::string("<unk>"));
  ASSERT_EQ(v.token_types[0], 2);
  ASSERT_EQ(v.token_types[1], 3);
  ASSERT_EQ(v.tokens[3 + 0xAB], std::string("<0xAB>"));
  ASSERT_EQ(v.token_types[3 + 0xAB], 6);
  ASSERT_EQ(v.bos_id, 1);
  ASSERT_EQ(v.eos_id, 2);
  ASSERT_EQ(v.unk_id, 0);
  ASSERT_TRUE(v.add_bos);
  ASSERT_TRUE(v.tokens[259].rfind("\xE2\x96\x81", 0) == 0 || v.tokens[259].size() > 1);  // a learned piece
  ASSERT_FLOAT_EQ(v.scores[259], -0.0f);
  const VocabData again = buildSpmVocab(320);
  ASSERT_EQ(again.tokens, v.tokens);
  // Padding with unused pieces when the corpus runs out of merges.
  const VocabData big = buildSpmVocab(32000);
  ASSERT_EQ(int(big.tokens.size()), 32000);
  ASSERT_EQ(big.token_types.back(), 5);
  ASSERT_TRUE(Tokenizer::fromVocab(big)->encode("hello", true, false).size() >= 2);
  ASSERT_THROW(buildSpmVocab(100), std::invalid_argument);
}

TEST(Tokenizer, syntheticGpt2Vocab) {
  const VocabData v = buildGpt2Vocab(400, "qwen2");
  ASSERT_EQ(int(v.tokens.size()), 400);
  ASSERT_EQ(v.pre, std::string("qwen2"));
  ASSERT_EQ(v.tokens[' '], std::string("\xC4\xA0"));
  ASSERT_EQ(v.tokens[397], std::string("<|endoftext|>"));
  ASSERT_EQ(v.tokens[398], std::string("<|im_start|>"));
  ASSERT_EQ(v.tokens[399], std::string("<|im_end|>"));
  ASSERT_EQ(v.token_types[399], 3);
  ASSERT_EQ(v.bos_id, 397);
  ASSERT_EQ(v.eos_id, 399);
  ASSERT_EQ(v.eot_id, 399);
  ASSERT_TRUE(!v.add_bos);
  ASSERT_TRUE(!v.merges.empty());
  // Every merge's parts and result are tokens, so each can fire.
  std::set<std::string> tokens(v.tokens.begin(), v.tokens.end());
  for (const auto& m : v.merges) {
    const auto sp = m.find(' ');
    ASSERT_TRUE(tokens.count(m.substr(0, sp)) && tokens.count(m.substr(sp + 1)) &&
                tokens.count(m.substr(0, sp) + m.substr(sp + 1)));
  }
  const BpeTokenizer t(v);
  ASSERT_EQ(t.mergeCount(), v.merges.size());
  // Common words come out as few tokens.
  ASSERT_TRUE(t.encode(" the", false, false).size() == 1);
  const VocabData big = buildGpt2Vocab(151936, "qwen2");
  ASSERT_EQ(int(big.tokens.size()), 151936);
  ASSERT_THROW(buildGpt2Vocab(200, "qwen2"), std::invalid_argument);
}

// A long input and a 5,000-byte word encode and decode back exactly; the time is
// reported, not asserted (speed is for benchmarks; a test must not depend on the
// machine's load).
TEST(Tokenizer, bpeEncodesALongInputAndALongWord) {
  const auto t = Tokenizer::fromVocab(buildGpt2Vocab(2000, "qwen2"));
  std::string text;
  for (int i = 0; i < 2000; ++i)
    text += "The quick brown fox " + std::to_string(i) + " jumps over the lazy dog.\n";
  text += std::string(5000, ' ') + "x";  // one long whitespace word
  const auto start = std::chrono::steady_clock::now();
  const auto ids = t->encode(text, false, false);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(t->decode(ids), text);
  moe::test::info("encoded %zu bytes into %zu tokens in %.1f ms", text.size(), ids.size(), ms);
  ASSERT_LT(ids.size(), text.size());  // merges happened: fewer tokens than bytes
}

// ---- dispatch and validation ----
TEST(Tokenizer, fromVocabValidates) {
  VocabData v = buildGpt2Vocab(300, "qwen2");
  v.model = "bert";
  ASSERT_THROW(Tokenizer::fromVocab(v), TokenizerError);
  v = buildGpt2Vocab(300, "qwen2");
  v.eos_id = 300;
  ASSERT_THROW(Tokenizer::fromVocab(v), TokenizerError);
  v = buildSpmVocab(300);
  v.token_types.pop_back();
  ASSERT_THROW(Tokenizer::fromVocab(v), TokenizerError);
  v = buildSpmVocab(300);
  v.token_types[0] = 1;
  v.unk_id = -1;  // no unknown piece at all: sentencepiece needs one
  ASSERT_THROW(Tokenizer::fromVocab(v), TokenizerError);
  v = buildSpmVocab(300);
  v.tokens[300 - 1] = v.tokens[300 - 2];  // a duplicate piece is tolerated (made unused)
  ASSERT_EQ(Tokenizer::fromVocab(v)->vocabSize(), 300);
}

// Through GGUF metadata (VocabData::writeTo / fromGguf, written elsewhere).
static void checkFromGgufRoundTrip(const std::string& kind) {
  const VocabData v = kind == "spm" ? buildSpmVocab(400) : buildGpt2Vocab(400, kind);
  gguf::GgufWriter w;
  w.setString("general.architecture", "llama");
  v.writeTo(w);
  const auto viaFile = Tokenizer::fromGguf(gguf::GgufFile::fromBytes(w.toBytes()));
  const auto direct = Tokenizer::fromVocab(v);
  for (const auto& s : kRoundTripSamples)
    ASSERT_EQ(viaFile->encode(s, true, true), direct->encode(s, true, true));
  ASSERT_EQ(viaFile->eos(), direct->eos());
  ASSERT_EQ(viaFile->bos(), direct->bos());
  ASSERT_EQ(viaFile->addBosDefault(), direct->addBosDefault());
}

TEST(Tokenizer, fromGgufRoundTrip) {
  for (const char* k : {"spm", "qwen2", "deepseek-llm"}) {
    SCOPED_TRACE(k);
    checkFromGgufRoundTrip(k);
  }
}

TEST(Tokenizer, demoModelTokenizer) {
  const auto file = gguf::GgufFile::fromBytes(synth::demoModelBytes());
  const auto t = Tokenizer::fromGguf(file);
  const std::string prompt = applyChatTemplate(chatFamilyFor(file), {{"user", "Hello there"}}, true);
  ASSERT_EQ(t->decode(t->encode(prompt, t->addBosDefault(), false)), prompt);
}

// ---- chat templates ----
TEST(Tokenizer, chatTemplates) {
  const std::vector<ChatMessage> conv = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Why?"}};
  ASSERT_EQ(applyChatTemplate(ChatFamily::Mixtral, conv, true),
            std::string("[INST] Be brief.\n\nHi [/INST]Hello.</s>[INST] Why? [/INST]"));
  ASSERT_EQ(applyChatTemplate(ChatFamily::ChatML, conv, true),
            std::string("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                        "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n"
                        "<|im_start|>assistant\n"));
  ASSERT_EQ(applyChatTemplate(ChatFamily::ChatML, {{"user", "Hi"}}, false),
            std::string("<|im_start|>user\nHi<|im_end|>\n"));
  ASSERT_EQ(applyChatTemplate(ChatFamily::DeepSeek, conv, true),
            std::string("Be brief.\n\nUser: Hi\n\nAssistant: Hello.<\xEF\xBD\x9C"
                        "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"
                        "User: Why?\n\nAssistant:"));
  ASSERT_EQ(applyChatTemplate(ChatFamily::Olmoe, conv, true),
            std::string("<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\nHello.<|endoftext|>\n"
                        "<|user|>\nWhy?\n<|assistant|>\n"));
  ASSERT_EQ(applyChatTemplate(ChatFamily::Mixtral, {{"user", "Hi"}}, true), std::string("[INST] Hi [/INST]"));
  ASSERT_EQ(chatStopStrings(ChatFamily::ChatML).front(), std::string("<|im_end|>"));
  ASSERT_EQ(std::string(chatFamilyName(ChatFamily::Olmoe)), std::string("olmoe"));
  ASSERT_EQ(applyChatTemplate(ChatFamily::Glm, conv, true),
            std::string("[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi<|assistant|>\nHello.<|user|>\nWhy?"
                        "<|assistant|>"));
  ASSERT_EQ(chatStopStrings(ChatFamily::Glm).front(), std::string("<|user|>"));
  const std::string h = applyChatTemplate(ChatFamily::Harmony, conv, true);
  ASSERT_TRUE(h.rfind("<|start|>system<|message|>", 0) == 0);
  ASSERT_TRUE(h.find("<|start|>developer<|message|># Instructions\n\nBe brief.<|end|>") != std::string::npos);
  ASSERT_TRUE(
      h.find("<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello.<|end|>"
             "<|start|>user<|message|>Why?<|end|><|start|>assistant") != std::string::npos);
  const std::string prompt = "<|start|>assistant";
  ASSERT_TRUE(h.size() >= prompt.size() && h.compare(h.size() - prompt.size(), prompt.size(), prompt) == 0);
  ASSERT_EQ(chatStopStrings(ChatFamily::Harmony).front(), std::string("<|return|>"));
}

TEST(Tokenizer, chatFamilyFromGguf) {
  struct Row {
    const char* name;
    const char* arch;
    const char* tmpl;
    ChatFamily family;
  };
  const Row rows[] = {
      {"llama", "llama", "", ChatFamily::Mixtral},
      {"qwen2moe", "qwen2moe", "", ChatFamily::ChatML},
      {"deepseek2", "deepseek2", "", ChatFamily::DeepSeek},
      {"olmoe", "olmoe", "", ChatFamily::Olmoe},
      {"glm4moe", "glm4moe", "", ChatFamily::Glm},
      {"gpt-oss", "gpt-oss", "", ChatFamily::Harmony},
      {"qwen35moe", "qwen35moe", "", ChatFamily::Qwen35},
      {"minimax-m2", "minimax-m2", "", ChatFamily::MiniMax},
      {"minimax template", "qwen3moe", "{{- ']~!b[' ~ ']~b]system' ~ '\\n' }}", ChatFamily::MiniMax},
      // Qwen3.5's own template is ChatML with the reasoning block: the architecture tells.
      {"qwen35moe with its template", "qwen35moe", "{{- '<|im_start|>assistant\\n<think>\\n' }}",
       ChatFamily::Qwen35},
      {"qwen35moe with a glm template", "qwen35moe", "[gMASK]<sop>", ChatFamily::Glm},
      {"glm template", "qwen2moe", "[gMASK]<sop>{% for m in messages %}", ChatFamily::Glm},
      {"llama with chatml template", "llama", "{{'<|im_start|>' + role}}", ChatFamily::ChatML},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const std::string arch = row.arch, tmpl = row.tmpl;
    gguf::GgufWriter w;
    w.setString("general.architecture", arch);
    if (!tmpl.empty()) w.setString("tokenizer.chat_template", tmpl);
    const auto file = gguf::GgufFile::fromBytes(w.toBytes());
    EXPECT_EQ(int(chatFamilyFor(file)), int(row.family));
  }
}

// A chat prompt through the tokenizer: markers become single control ids.
TEST(Tokenizer, chatPromptTokenizes) {
  const auto t = Tokenizer::fromVocab(buildGpt2Vocab(400, "qwen2"));
  const std::string prompt = applyChatTemplate(ChatFamily::ChatML, {{"user", "Hi"}}, true);
  const auto ids = t->encode(prompt, t->addBosDefault(), true);
  ASSERT_EQ(int(std::count(ids.begin(), ids.end(), idOf(*t, "<|im_start|>"))), 2);
  ASSERT_EQ(int(std::count(ids.begin(), ids.end(), idOf(*t, "<|im_end|>"))), 1);
}

// Gemma 4's "gemma4" vocabulary (llama.cpp's LLAMA_VOCAB_PRE_TYPE_GEMMA4): spaces as ▁,
// runs of newlines apart from the rest, merges by rank over UTF-8 characters (the
// leftmost of equal ranks first), byte tokens for what has no piece. Expected ids
// worked out by hand from those rules.
TEST(Tokenizer, gemma4MergesOverCharactersWithByteFallback) {
  VocabData v;
  v.model = "gemma4";
  auto add = [&](const std::string& text, int32_t type) {
    v.tokens.push_back(text);
    v.token_types.push_back(type);
    v.scores.push_back(0.0f);
    return int32_t(v.tokens.size() - 1);
  };
  add("<pad>", 3);
  const int32_t eos = add("<eos>", 3), bos = add("<bos>", 3), unk = add("<unk>", 2);
  const int32_t turn = add("<|turn>", 3), turn_end = add("<turn|>", 3), channel = add("<|channel>", 4);
  std::vector<int32_t> byte(256);
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b)
    byte[size_t(b)] = add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 6);
  const std::string sp = "\xE2\x96\x81";
  const int32_t h = add("h", 1), e = add("e", 1), l = add("l", 1), o = add("o", 1), w = add("w", 1);
  const int32_t he = add("he", 1);
  add("ll", 1);
  add("hell", 1);
  const int32_t hello = add("hello", 1), sp_hello = add(sp + "hello", 1);
  const int32_t nl = add("\n", 1), nl2 = add("\n\n", 1), sp_tok = add(sp, 1), ue = add("\xC3\xBC", 1);
  v.merges = {"h e", "l l", "he ll", "hell o", sp + " hello"};
  v.bos_id = bos;
  v.eos_id = eos;
  v.unk_id = unk;
  v.add_bos = true;
  v.add_space_prefix = false;
  const auto t = Tokenizer::fromVocab(v);
  ASSERT_EQ(dynamic_cast<const Tokenizer*>(t.get())->vocabSize(), int32_t(v.tokens.size()));

  // "hello hello": both "he" merge first (the left one first), then "ll", "hell",
  // "hello", "▁hello"; "\n\n" is a token; "world": w, o, then r, l, d without pieces:
  // r and d as their bytes, l a piece.
  EXPECT_EQ(t->encode("hello hello\n\nworld", false, false),
            (std::vector<int32_t>{hello, sp_hello, nl2, w, o, byte['r'], l, byte['d']}));
  // No dummy prefix; a space is ▁ (no merge joins it to "he"); three newlines are not a
  // token and no merge joins newlines: three "\n".
  EXPECT_EQ(t->encode(" he", true, false), (std::vector<int32_t>{bos, sp_tok, he}));
  EXPECT_EQ(t->encode("eh", false, false), (std::vector<int32_t>{e, h}));
  EXPECT_EQ(t->encode("\n\n\n", false, false), (std::vector<int32_t>{nl, nl, nl}));
  // UTF-8 characters are symbols: ü is a piece, € (3 bytes) falls back to bytes.
  EXPECT_EQ(t->encode("\xC3\xBC\xE2\x82\xAC", false, false),
            (std::vector<int32_t>{ue, byte[0xE2], byte[0x82], byte[0xAC]}));
  // Markers only where asked for.
  EXPECT_EQ(t->encode("<|turn>he", false, true), (std::vector<int32_t>{turn, he}));
  EXPECT_NE(t->encode("<|channel>", false, false), (std::vector<int32_t>{channel}));
  // Decoding: ▁ as a space, bytes as bytes, control tokens as nothing.
  const std::string text = "hello hello\n\nworld \xE2\x82\xAC!";
  EXPECT_EQ(t->decode(t->encode(text, true, false)), text);
  EXPECT_EQ(t->tokenBytes(sp_hello), " hello");
  EXPECT_EQ(t->tokenBytes(turn), "");
  // A turn ends at <turn|> even where the file names no eot id.
  EXPECT_TRUE(t->isEndOfGeneration(turn_end) && t->isEndOfGeneration(eos) && !t->isEndOfGeneration(turn));
  // A long line (pasted text) merges the same, quickly: 5000 x "hello ".
  std::string line;
  std::vector<int32_t> want = {hello};
  for (int i = 0; i < 5000; ++i) line += "hello ";
  for (int i = 1; i < 5000; ++i) want.push_back(sp_hello);
  want.push_back(sp_tok);
  EXPECT_EQ(t->encode(line, false, false), want);
}
