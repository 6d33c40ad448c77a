#include "synth/synthetic_vocab.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace moe::synth {

namespace {

// The training text: written for this file, a little of everything a chat
// model sees (prose, code with tabs and newlines, numbers, other scripts).
constexpr std::string_view kCorpus =
    R"CORPUS(The quick brown fox jumps over the lazy dog. The dog did not mind; it was a warm afternoon and the sun was shining.
Mixture-of-experts models route every token to a few experts. Only the selected experts run, so the model can be much larger than the compute it spends on each token.
When the model does not fit in the memory of the graphics card, the experts stay in the main memory and the ones that are needed are copied in on demand.
This is a simple chat application. You can ask it a question, and it will answer you. It is not always right, but it tries to be helpful and honest.
What is the capital of France? The capital of France is Paris. What is the capital of Germany? The capital of Germany is Berlin.
Please write a short poem about the sea. The sea is deep, the sea is wide, the waves come in with every tide.
I'm sure you'll like it: they've said it's the best there is, and we'd all agree that it isn't bad.
In 2024 there were 365 days plus one, and 12 months; 3.14159 is close to pi, and 1,000,000 is a million.
Questions and answers, summaries and translations, stories and explanations: the assistant helps with many things.

def tokenize(text, vocab):
	"""Split text into tokens."""
	tokens = []
	for word in text.split():
		if word in vocab:
			tokens.append(vocab[word])
		else:
			tokens.extend(vocab.get(c, 0) for c in word)
	return tokens

class Counter:
    def __init__(self):
        self.count = 0

    def increment(self, step=1):
        self.count += step
        return self.count

#include <vector>
#include <string>

int main(int argc, char** argv) {
	std::vector<std::string> args(argv, argv + argc);
	for (const auto& arg : args) {
		if (arg == "--help") {
			std::printf("usage: %s [options]\n", argv[0]);
			return 0;
		}
	}
	return 1;
}

for (int i = 0; i < n; ++i) { sum += x[i] * w[i]; }
const result = await fetch(url, { method: "POST", body: JSON.stringify(data) });
SELECT name, count(*) FROM messages WHERE chat_id = ? GROUP BY name ORDER BY name;

Le renard brun rapide saute par-dessus le chien paresseux. Nous sommes très contents de vous voir à Paris, où il fait beau.
Der schnelle braune Fuchs springt über den faulen Hund. Wir möchten heute Abend ins Kino gehen, wenn es nicht regnet.
El rápido zorro marrón salta sobre el perro perezoso. ¿Dónde está la estación? Está a la derecha, señor.
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, как дела? Спасибо, хорошо.
敏捷的棕色狐狸跳过了懒狗。你好，世界！我们今天去学校学习中文。
日本語の文章もすこし書きます。こんにちは、世界。ありがとうございます。
안녕하세요, 세계! 오늘 날씨가 좋네요.
Emoji too: 😀 🚀 ❤️ 👍 — and quotes “like this” or ‘this’.
The end. The experts are ready, the model is loaded, and the chat can begin.
)CORPUS";

// A word of training text as symbols, with its count in the corpus.
using Symbols = std::vector<std::string>;

size_t utf8Length(unsigned char lead) {
  return lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 1;
}

// UTF-8 text -> one string per code point.
Symbols codepoints(std::string_view s) {
  Symbols out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::min(utf8Length(static_cast<unsigned char>(s[i])), s.size() - i);
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

struct Merge {
  std::string left, right;
};

// Plain BPE training: repeatedly merge the most frequent adjacent pair (ties:
// the smallest pair in byte order, for determinism) until `max_merges` or no
// pair occurs twice.
std::vector<Merge> trainBpe(std::map<Symbols, int> words, size_t max_merges) {
  std::vector<Merge> merges;
  while (merges.size() < max_merges) {
    std::map<std::pair<std::string, std::string>, int> pair_counts;
    for (const auto& [symbols, count] : words)
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pair_counts[{symbols[i], symbols[i + 1]}] += count;
    auto best = pair_counts.end();
    for (auto it = pair_counts.begin(); it != pair_counts.end(); ++it)
      if (best == pair_counts.end() || it->second > best->second) best = it;
    if (best == pair_counts.end() || best->second < 2) break;
    const auto [left, right] = best->first;
    merges.push_back({left, right});
    std::map<Symbols, int> next;
    for (const auto& [symbols, count] : words) {
      Symbols merged;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          merged.push_back(left + right);
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      }
      next[merged] += count;
    }
    words = std::move(next);
  }
  return merges;
}

// ---- SentencePiece-style words: "▁" + run of non-space characters ----

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581

std::map<Symbols, int> spmWords() {
  std::map<Symbols, int> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) ++words[codepoints(word)];
    word.clear();
  };
  for (char c : kCorpus) {
    if (c == ' ') {
      flush();
      word = std::string(kSpaceMarker);
    } else if (c == '\n' || c == '\t') {
      flush();
      ++words[Symbols{std::string(1, c)}];  // kept alone: no merges across lines
    } else {
      word.push_back(c);
    }
  }
  flush();
  return words;
}

// Characters of the corpus (space as U+2581), most frequent first.
std::vector<std::string> spmCharacters() {
  std::map<std::string, int> counts;
  for (const auto& cp : codepoints(kCorpus)) ++counts[cp == " " ? std::string(kSpaceMarker) : cp];
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> out;
  for (const auto& [cp, count] : sorted) out.push_back(cp);
  return out;
}

// ---- GPT-2 byte-level words ----

// GPT-2's bytes_to_unicode() spelling (openai/gpt-2 src/encoder.py). The
// tokenizer in inference/ has the same table; models/ must not depend on it.
std::string byteLevel(unsigned char b) {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    unsigned next = 0x100;
    for (unsigned i = 0; i < 256; ++i) {
      const bool itself = (i >= 0x21 && i <= 0x7E) || (i >= 0xA1 && i <= 0xAC) || (i >= 0xAE);
      const unsigned cp = itself ? i : next++;
      std::string s;
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      t[i] = s;
    }
    return t;
  }();
  return table[b];
}

enum class CharClass { Letter, Digit, Space, Other };

CharClass classify(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CharClass::Letter;
  if (c >= '0' && c <= '9') return CharClass::Digit;
  if (c == ' ' || c == '\n' || c == '\t' || c == '\r') return CharClass::Space;
  return CharClass::Other;
}

// A simplified GPT-2 split (optional leading space + a run of one class); the
// merges it yields are a subset of what the real pre-tokenizers allow. Digits
// stay single, which suits qwen2 and is harmless elsewhere.
std::map<Symbols, int> gpt2Words() {
  std::map<Symbols, int> words;
  const std::string_view text = kCorpus;
  for (size_t i = 0; i < text.size();) {
    size_t start = i;
    if (text[i] == ' ' && i + 1 < text.size() &&
        classify(static_cast<unsigned char>(text[i + 1])) != CharClass::Space)
      ++i;
    const CharClass cls = classify(static_cast<unsigned char>(text[i]));
    size_t end = i + 1;
    if (cls != CharClass::Digit)
      while (end < text.size() && classify(static_cast<unsigned char>(text[end])) == cls) ++end;
    Symbols symbols;
    for (size_t k = start; k < end; ++k) symbols.push_back(byteLevel(static_cast<unsigned char>(text[k])));
    ++words[symbols];
    i = end;
  }
  return words;
}

// Greedy BPE training does not depend on where it stops, so we train each
// kind once to exhaustion (thread-safe static) and take a prefix.
const std::vector<Merge>& allSpmMerges() {
  static const std::vector<Merge> merges = trainBpe(spmWords(), SIZE_MAX);
  return merges;
}
const std::vector<Merge>& allGpt2Merges() {
  static const std::vector<Merge> merges = trainBpe(gpt2Words(), SIZE_MAX);
  return merges;
}
std::vector<Merge> firstMerges(const std::vector<Merge>& all, size_t n) {
  return {all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min(n, all.size()))};
}

void addToken(VocabData& v, std::string text, float score, int32_t type) {
  v.tokens.push_back(std::move(text));
  v.scores.push_back(score);
  v.token_types.push_back(type);
}

constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUnused = 5, kByte = 6;

}  // namespace

VocabData buildSpmVocab(int target_size) {
  constexpr int kBase = 3 + 256;
  if (target_size < kBase + 1)
    throw std::invalid_argument("SentencePiece vocabulary needs at least 260 tokens");
  VocabData v;
  v.model = "llama";
  addToken(v, "<unk>", 0.0f, kUnknown);
  addToken(v, "<s>", 0.0f, kControl);
  addToken(v, "</s>", 0.0f, kControl);
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b)
    addToken(v, std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0.0f, kByte);

  // Room beyond the fixed tokens: characters get at most half, merges the rest.
  const size_t room = static_cast<size_t>(target_size - kBase);
  std::vector<std::string> chars = spmCharacters();
  chars.resize(std::min(chars.size(), room / 2));
  const std::vector<Merge> merges = firstMerges(allSpmMerges(), room - chars.size());

  std::unordered_set<std::string> seen(v.tokens.begin(), v.tokens.end());
  int rank = 0;
  for (const auto& m : merges) {
    // Two merges may spell the same piece (a+bc, ab+c): keep the first.
    if (seen.insert(m.left + m.right).second)
      addToken(v, m.left + m.right, -static_cast<float>(rank), kNormal);
    ++rank;
  }
  for (const auto& c : chars)
    if (seen.insert(c).second) addToken(v, c, -static_cast<float>(rank++), kNormal);
  for (int n = 0; static_cast<int>(v.tokens.size()) < target_size; ++n)
    addToken(v, "<unused_" + std::to_string(n) + ">", 0.0f, kUnused);

  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_bos = true;
  v.add_space_prefix = true;
  v.remove_extra_whitespaces = false;
  return v;
}

VocabData buildGemma4Vocab(int target_size) {
  const char* kControl4[] = {"<pad>", "<eos>", "<bos>"};
  const int kBase = 3 + 1 + 4 + 256;
  if (target_size < kBase + 1) throw std::invalid_argument("gemma4 vocabulary needs at least 265 tokens");
  VocabData v;
  v.model = "gemma4";
  for (const char* t : kControl4) addToken(v, t, 0.0f, kControl);
  addToken(v, "<unk>", 0.0f, kUnknown);
  addToken(v, "<|turn>", 0.0f, kControl);
  addToken(v, "<turn|>", 0.0f, kControl);
  addToken(v, "<|channel>", 0.0f, 4);  // user-defined, as the converter writes them (always shown)
  addToken(v, "<channel|>", 0.0f, 4);
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b)
    addToken(v, std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0.0f, kByte);
  // The characters first (every merge's sides are spelled from them), then one piece
  // per merge in rank order; the merges as "left right".
  const size_t room = static_cast<size_t>(target_size - kBase);
  std::vector<std::string> chars = spmCharacters();
  chars.resize(std::min(chars.size(), room / 2));
  const std::vector<Merge> merges = firstMerges(allSpmMerges(), room - chars.size());
  std::unordered_set<std::string> seen(v.tokens.begin(), v.tokens.end());
  for (const auto& c : chars)
    if (seen.insert(c).second) addToken(v, c, 0.0f, kNormal);
  for (const auto& m : merges) {
    v.merges.push_back(m.left + " " + m.right);
    if (seen.insert(m.left + m.right).second) addToken(v, m.left + m.right, 0.0f, kNormal);
  }
  for (int n = 0; static_cast<int>(v.tokens.size()) < target_size; ++n)
    addToken(v, "<unused" + std::to_string(n) + ">", 0.0f, kUnused);
  v.pad_id = 0;
  v.eos_id = 1;
  v.bos_id = 2;
  v.unk_id = 3;
  v.eot_id = 5;  // <turn|>
  v.add_bos = true;
  v.add_space_prefix = false;
  return v;
}

VocabData buildGpt2Vocab(int target_size, std::string pre) {
  const std::string kBos =
      "<\xEF\xBD\x9C"
      "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  const std::string kEos =
      "<\xEF\xBD\x9C"
      "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  std::vector<std::string> specials = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  if (pre == "deepseek-llm") {
    specials.push_back(kBos);
    specials.push_back(kEos);
  }
  const int fixed = 256 + static_cast<int>(specials.size());
  if (target_size < fixed + 1)
    throw std::invalid_argument("gpt2 vocabulary too small for bytes and specials");

  VocabData v;
  v.model = "gpt2";
  v.pre = std::move(pre);
  for (int b = 0; b < 256; ++b) addToken(v, byteLevel(static_cast<unsigned char>(b)), 0.0f, kNormal);
  const std::vector<Merge> merges = firstMerges(allGpt2Merges(), static_cast<size_t>(target_size - fixed));
  std::unordered_set<std::string> seen(v.tokens.begin(), v.tokens.end());
  for (const auto& m : merges) {
    v.merges.push_back(m.left + " " + m.right);
    if (seen.insert(m.left + m.right).second) addToken(v, m.left + m.right, 0.0f, kNormal);
  }
  for (int n = 0; static_cast<int>(v.tokens.size()) + static_cast<int>(specials.size()) < target_size; ++n)
    addToken(v, "<|unused_" + std::to_string(n) + "|>", 0.0f, kUnused);
  const auto firstSpecial = static_cast<int32_t>(v.tokens.size());
  for (const auto& s : specials) addToken(v, s, 0.0f, kControl);

  const int32_t endoftext = firstSpecial, im_end = firstSpecial + 2;
  v.scores.clear();  // gpt2 vocabularies carry no scores
  v.add_space_prefix = false;
  v.add_bos = false;
  v.pad_id = endoftext;
  if (v.pre == "olmo") {
    v.bos_id = v.eos_id = endoftext;
  } else if (v.pre == "deepseek-llm") {
    v.bos_id = firstSpecial + 3;
    v.eos_id = firstSpecial + 4;
    v.add_bos = true;
  } else {
    v.bos_id = endoftext;
    v.eos_id = v.eot_id = im_end;
  }
  return v;
}

}  // namespace moe::synth
