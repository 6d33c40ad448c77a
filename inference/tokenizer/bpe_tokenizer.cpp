#include "inference/tokenizer/bpe_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <queue>

namespace moe {

// ---- GPT-2 byte <-> unicode table ----

namespace gpt2 {
namespace {

bool standsForItself(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

struct Table {
  std::array<char32_t, 256> cp{};
  std::array<std::string, 256> text;
  Table() {
    char32_t next = 0x100;
    for (unsigned b = 0; b < 256; ++b) {
      cp[b] = standsForItself(b) ? static_cast<char32_t>(b) : next++;
      text[b] = utf8(cp[b]);
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

// Decodes one UTF-8 code point at s[i]; advances i. Returns false on bad input.
bool nextCodepoint(std::string_view s, size_t& i, char32_t& cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t extra = 0;
  if (c < 0x80)
    extra = 0;
  else if ((c >> 5) == 0x6)
    extra = 1;
  else if ((c >> 4) == 0xE)
    extra = 2;
  else if ((c >> 3) == 0x1E)
    extra = 3;
  else
    return false;
  if (i + extra >= s.size()) return false;
  cp = extra == 0 ? c : (c & (0x3Fu >> extra));
  for (size_t k = 1; k <= extra; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (cc & 0x3F);
  }
  i += extra + 1;
  return true;
}

}  // namespace

char32_t byteToCodepoint(uint8_t byte) { return table().cp[byte]; }
const std::string& byteToUtf8(uint8_t byte) { return table().text[byte]; }

int codepointToByte(char32_t cp) {
  if (cp < 256 && standsForItself(static_cast<unsigned>(cp))) return static_cast<int>(cp);
  if (cp >= 0x100 && cp < 0x100 + 68) {
    // The n-th byte that does not stand for itself.
    unsigned n = static_cast<unsigned>(cp - 0x100);
    for (unsigned b = 0; b < 256; ++b)
      if (!standsForItself(b) && n-- == 0) return static_cast<int>(b);
  }
  return -1;
}

std::string bytesToByteLevel(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += byteToUtf8(static_cast<uint8_t>(c));
  return out;
}

bool byteLevelToBytes(std::string_view byte_level, std::string& out) {
  out.clear();
  for (size_t i = 0; i < byte_level.size();) {
    char32_t cp = 0;
    if (!nextCodepoint(byte_level, i, cp)) return false;
    const int b = codepointToByte(cp);
    if (b < 0) return false;
    out.push_back(static_cast<char>(b));
  }
  return true;
}

}  // namespace gpt2

// ---- Pre-tokenizer ----

namespace {

// Regexes are facts copied from the models' published tokenizer configs.
// GPT-2: openai/gpt-2 src/encoder.py (also GPT-NeoX/OLMo tokenizer.json ByteLevel).
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama-3: meta-llama/llama3 llama/tokenizer.py pat_str (= tiktoken cl100k_base).
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2 / Qwen1.5 / Qwen3: tokenizer.json pre_tokenizer Split pattern; the
// Llama-3 pattern with single digits.
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen3.5 / Qwen3.6 (GGUF pre "qwen35"): Qwen2's pattern with combining marks
// (\p{M}) counted as part of a word and left out of the punctuation runs, so a
// letter followed by its accents or vowel signs (Devanagari, Thai, decomposed Latin)
// stays one piece. Sources: the tokenizer.json pre_tokenizer Split pattern the Qwen3.5
// models publish, as quoted in llama.cpp's src/llama-vocab.cpp
// (LLAMA_VOCAB_PRE_TYPE_QWEN35, selected by tokenizer.ggml.pre "qwen35").
constexpr const char* kQwen35Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// GPT-4o / gpt-oss (tiktoken o200k_base pat_str; GGUF pre "gpt-4o"): cased words
// split at case changes, contractions attached, up to 3 digits, "/" kept with
// punctuation runs.
constexpr const char* kO200kRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM / DeepSeekMoE v1 tokenizer.json: a Sequence of Split
// (Isolated) regexes. The published second regex lists the cased letters of
// Unicode as explicit ranges (A-Za-z, µ, À-Ö, ...); we write that set as PCRE2's
// \p{L&} (Lu, Ll, Lt), which may differ for code points assigned in later
// Unicode versions. The others are as published.
std::vector<std::string> deepseekLlmRegexes() {
  return {
      R"([\r\n])",
      R"(\s?\p{L&}+)",
      "\\s?[!-/"
      ":-~\xEF\xBC\x81-\xEF\xBC\x8F\xEF\xBC\x9A-\xEF\xBD\x9E\xE2\x80\x98-\xE2\x80\x9F\xE3\x80\x80-"
      "\xE3\x80\x82]+",  // ！-／ ：-～ ‘-‟ 　-。
      R"(\s+$)",
      "[\xE4\xB8\x80-\xE9\xBE\xA5\xE0\xA0\x80-\xE4\xB8\x80\xEA\xB0\x80-\xED\x9F\xBF]+",  // 一-龥 ࠀ-一
                                                                                         // 가-퟿
      R"(\p{N}+)",
  };
}

std::vector<std::string> regexesFor(std::string_view name) {
  if (name == "default" || name == "gpt2" || name == "olmo") return {kGpt2Regex};
  if (name == "llama-bpe" || name == "llama3") return {kLlama3Regex};
  if (name == "qwen2") return {kQwen2Regex};
  if (name == "qwen35") return {kQwen35Regex};
  // llama.cpp's llama-vocab.cpp gives MiniMax-M2's "minimax-m2" the same split as "gpt-4o".
  if (name == "gpt-4o" || name == "minimax-m2") return {kO200kRegex};
  if (name == "deepseek-llm") return deepseekLlmRegexes();
  return {};
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  explicit Regex(const std::string& pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    // UTF + UCP: \s, \p{..} and (?i) follow Unicode; MATCH_INVALID_UTF lets
    // invalid UTF-8 through (it is never matched and ends up between matches).
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
    if (!code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw TokenizerError("pre-tokenizer regex does not compile at " + std::to_string(offset) + ": " +
                           reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional speed-up; interpreted if it fails
  }
  ~Regex() { pcre2_code_free(code); }

  // Appends to `out` the matches in `text` and the non-empty gaps between them.
  void splitIsolated(std::string_view text, pcre2_match_data* md, std::vector<std::string_view>& out) const {
    size_t pos = 0, emitted = 0;
    while (pos < text.size()) {
      const int rc =
          pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos, 0, md, nullptr);
      if (rc < 0) break;  // no more matches (or an error: keep the rest as one piece)
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t start = ov[0], end = ov[1];
      if (start > emitted) out.push_back(text.substr(emitted, start - emitted));
      if (end > start) {
        out.push_back(text.substr(start, end - start));
        emitted = pos = end;
      } else {
        pos = end + 1;  // empty match: step on (none of our patterns match empty)
        emitted = start;
      }
    }
    if (emitted < text.size()) out.push_back(text.substr(emitted));
  }
};

PreTokenizer::PreTokenizer(std::string_view pre_name) {
  std::vector<std::string> patterns = regexesFor(pre_name);
  name_ = std::string(pre_name);
  if (patterns.empty()) {
    warning_ = "unknown tokenizer.ggml.pre \"" + name_ +
               "\": using the GPT-2 pre-tokenizer; tokens may differ from the model's";
    name_ = "default";
    patterns = regexesFor(name_);
  }
  for (const auto& p : patterns) regexes_.push_back(std::make_unique<Regex>(p));
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string> PreTokenizer::knownNames() {
  return {"default", "gpt2",   "olmo",   "llama-bpe",  "llama3",
          "qwen2",   "qwen35", "gpt-4o", "minimax-m2", "deepseek-llm"};
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  for (const auto& regex : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(regex->code, nullptr);
    std::vector<std::string_view> next;
    next.reserve(pieces.size() * 2);
    for (auto piece : pieces) regex->splitIsolated(piece, md, next);
    pcre2_match_data_free(md);
    pieces = std::move(next);
  }
  return pieces;
}

// ---- BpeTokenizer ----

BpeTokenizer::BpeTokenizer(const VocabData& vocab) {
  loadCommon(vocab);
  pre_ = std::make_unique<PreTokenizer>(vocab.pre.empty() ? "default" : vocab.pre);
  ids_by_text_.reserve(pieces_.size());
  token_bytes_.resize(pieces_.size());
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const auto id = static_cast<int32_t>(i);
    // Special tokens must not be reachable through merges of ordinary text.
    if (type(id) == TokenType::Normal || type(id) == TokenType::Byte) ids_by_text_.emplace(pieces_[i], id);
    if (type(id) == TokenType::Control || type(id) == TokenType::Unused) continue;
    if (!gpt2::byteLevelToBytes(pieces_[i], token_bytes_[i])) token_bytes_[i] = pieces_[i];
  }
  for (unsigned b = 0; b < 256; ++b) {
    const auto it = ids_by_text_.find(gpt2::byteToUtf8(static_cast<uint8_t>(b)));
    byte_ids_[b] = it == ids_by_text_.end() ? -1 : it->second;
  }
  loadMerges(vocab.merges);
}

BpeTokenizer::~BpeTokenizer() = default;

void BpeTokenizer::loadMerges(const std::vector<std::string>& merges) {
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    const size_t space = m.find(' ', 1);  // a part is never empty; the first char may be any
    if (space == std::string::npos) continue;
    const std::string left = m.substr(0, space), right = m.substr(space + 1);
    const auto l = ids_by_text_.find(left), r = ids_by_text_.find(right),
               result = ids_by_text_.find(left + right);
    // Merges whose parts or result are not tokens can never fire: skip them.
    if (l == ids_by_text_.end() || r == ids_by_text_.end() || result == ids_by_text_.end()) continue;
    merges_.emplace(pairKey(l->second, r->second),
                    Merge{static_cast<int32_t>(rank), result->second});  // first (lowest) rank wins
  }
}

// Classic BPE on one pre-tokenized word: repeatedly merge the adjacent pair
// of lowest rank (leftmost on ties). A heap of candidate pairs over a linked
// list of symbols keeps long words (runs of spaces, minified code) O(n log n).
std::vector<int32_t> BpeTokenizer::mergeWord(std::string_view word) const {
  struct Symbol {
    int32_t id;
    int prev, next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    int32_t id = byte_ids_[static_cast<uint8_t>(word[i])];
    if (id < 0) id = unk_;
    if (id < 0)
      throw TokenizerError("vocabulary has no token for byte " +
                           std::to_string(static_cast<uint8_t>(word[i])));
    symbols.push_back({id, static_cast<int>(i) - 1, static_cast<int>(i) + 1});
  }
  if (!symbols.empty()) symbols.back().next = -1;

  struct Candidate {
    int32_t rank;
    int left;
    int32_t left_id, right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int left) {
    if (left < 0 || symbols[static_cast<size_t>(left)].next < 0) return;
    const auto& a = symbols[static_cast<size_t>(left)];
    const auto& b = symbols[static_cast<size_t>(a.next)];
    const auto it = merges_.find(pairKey(a.id, b.id));
    if (it != merges_.end()) heap.push({it->second.rank, left, a.id, b.id});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    auto& a = symbols[static_cast<size_t>(c.left)];
    // Stale candidates: a symbol's id only changes by growing, so matching ids
    // mean the pair is still there.
    if (a.id != c.left_id || a.next < 0 || symbols[static_cast<size_t>(a.next)].id != c.right_id) continue;
    auto& b = symbols[static_cast<size_t>(a.next)];
    a.id = merges_.at(pairKey(c.left_id, c.right_id)).result;
    b.id = -1;  // removed
    a.next = b.next;
    if (b.next >= 0) symbols[static_cast<size_t>(b.next)].prev = c.left;
    consider(a.prev);
    consider(c.left);
  }
  std::vector<int32_t> ids;
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
    ids.push_back(symbols[static_cast<size_t>(i)].id);
  return ids;
}

void BpeTokenizer::appendWord(std::string_view word, std::vector<int32_t>& out) const {
  std::string key(word);
  {
    std::lock_guard lock(cache_mutex_);
    const auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids = mergeWord(word);
  out.insert(out.end(), ids.begin(), ids.end());
  std::lock_guard lock(cache_mutex_);
  constexpr size_t kMaxCachedWords = 1 << 16;
  if (cache_.size() >= kMaxCachedWords) cache_.clear();
  cache_.emplace(std::move(key), std::move(ids));
}

void BpeTokenizer::encodeRun(std::string_view run, bool /*at_text_start*/, std::vector<int32_t>& out) const {
  for (auto word : pre_->split(run)) appendWord(word, out);
}

std::string BpeTokenizer::tokenBytes(int32_t id) const { return token_bytes_.at(static_cast<size_t>(id)); }

}  // namespace moe
