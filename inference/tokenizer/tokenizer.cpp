// Base-class pieces shared by both vocabulary kinds: validation of VocabData,
// special-token splitting, decode, end-of-generation ids, and the dispatch
// from tokenizer.ggml.model to a tokenizer.
#include "inference/tokenizer/tokenizer.h"

#include <algorithm>
#include <array>

#include "inference/tokenizer/bpe_tokenizer.h"
#include "inference/tokenizer/gemma4_tokenizer.h"
#include "inference/tokenizer/spm_tokenizer.h"

namespace moe {

namespace {

// Texts of control tokens the chat templates (chat_template.cpp) end a turn
// with, in the families we support: Mixtral </s>, ChatML <|im_end|>,
// Qwen/OLMoE <|endoftext|>, DeepSeek <｜end▁of▁sentence｜> (fullwidth bars,
// U+2581), Llama-3 <|eot_id|> / <|end_of_text|>, Gemma 4 <turn|> (its
// generation_config's second eos id).
constexpr std::array<std::string_view, 7> kTurnEndTexts = {
    "</s>",
    "<|im_end|>",
    "<|endoftext|>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<turn|>"};

void checkId(int32_t id, size_t n, const char* what) {
  if (id < -1 || id >= static_cast<int64_t>(n))
    throw TokenizerError(std::string("vocabulary ") + what + " id " + std::to_string(id) +
                         " is out of range");
}

bool isSpecialType(TokenType t) { return t == TokenType::Control || t == TokenType::UserDefined; }

}  // namespace

// ---- SpecialTokenMatcher ----

void SpecialTokenMatcher::add(std::string text, int32_t id) {
  if (text.empty()) return;
  auto& list = by_first_byte_[static_cast<unsigned char>(text[0])];
  list.emplace_back(std::move(text), id);
  // Longest first so that e.g. "<|im_end|>" wins over a shorter "<|im".
  std::stable_sort(list.begin(), list.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

std::vector<SpecialTokenMatcher::Fragment> SpecialTokenMatcher::split(std::string_view text) const {
  std::vector<Fragment> out;
  size_t raw_start = 0;
  auto flushRaw = [&](size_t end) {
    if (end > raw_start) out.push_back({text.substr(raw_start, end - raw_start), -1, raw_start});
  };
  for (size_t pos = 0; pos < text.size();) {
    const auto it = by_first_byte_.find(static_cast<unsigned char>(text[pos]));
    const std::pair<std::string, int32_t>* match = nullptr;
    if (it != by_first_byte_.end()) {
      for (const auto& candidate : it->second) {
        if (text.compare(pos, candidate.first.size(), candidate.first) == 0) {
          match = &candidate;
          break;
        }
      }
    }
    if (!match) {
      ++pos;
      continue;
    }
    flushRaw(pos);
    out.push_back({text.substr(pos, match->first.size()), match->second, pos});
    pos += match->first.size();
    raw_start = pos;
  }
  flushRaw(text.size());
  return out;
}

// ---- Tokenizer ----

std::vector<int32_t> Tokenizer::encodePieces(std::span<const TextPiece> pieces, bool add_bos) const {
  std::vector<int32_t> out;
  if (add_bos && bos_ >= 0) out.push_back(bos_);
  for (const PromptRun& r : runs(pieces)) {
    if (r.marker >= 0)
      out.push_back(r.marker);
    else
      encodeRun(r.text, r.at_text_start, out);
  }
  return out;
}

// ---- TokenizerCommon ----

std::vector<PromptRun> TokenizerCommon::runs(std::span<const TextPiece> pieces) const {
  std::vector<PromptRun> out;
  std::string run;  // plain text since the last marker, across pieces
  size_t run_start = 0, offset = 0;
  auto flushRun = [&] {
    if (!run.empty()) out.push_back({std::move(run), -1, run_start == 0});
    run.clear();
  };
  auto addPlain = [&](std::string_view text) {
    if (run.empty()) run_start = offset;
    run += text;
    offset += text.size();
  };
  for (const TextPiece& piece : pieces) {
    if (!piece.markers || specials_.empty()) {
      addPlain(piece.text);
      continue;
    }
    for (const auto& fragment : specials_.split(piece.text)) {
      if (fragment.id < 0) {
        addPlain(fragment.text);
        continue;
      }
      flushRun();
      out.push_back({std::string(), fragment.id, false});
      offset += fragment.text.size();
    }
  }
  flushRun();
  return out;
}

void TokenizerCommon::loadCommon(const VocabData& vocab) {
  const size_t n = vocab.tokens.size();
  if (n == 0) throw TokenizerError("vocabulary has no tokens");
  if (!vocab.token_types.empty() && vocab.token_types.size() != n)
    throw TokenizerError("token_type length differs from tokens");
  if (!vocab.scores.empty() && vocab.scores.size() != n)
    throw TokenizerError("scores length differs from tokens");
  checkId(vocab.bos_id, n, "bos");
  checkId(vocab.eos_id, n, "eos");
  checkId(vocab.eot_id, n, "eot");
  checkId(vocab.unk_id, n, "unknown");
  checkId(vocab.pad_id, n, "padding");

  pieces_ = vocab.tokens;
  types_.assign(n, TokenType::Normal);
  for (size_t i = 0; i < vocab.token_types.size(); ++i) {
    const int32_t t = vocab.token_types[i];
    // Unknown type numbers (some converters write 0) are treated as normal.
    types_[i] = (t >= 1 && t <= 6) ? static_cast<TokenType>(t) : TokenType::Normal;
  }
  bos_ = vocab.bos_id;
  eos_ = vocab.eos_id;
  eot_ = vocab.eot_id;
  unk_ = vocab.unk_id;
  pad_ = vocab.pad_id;
  add_bos_ = vocab.add_bos;

  end_ids_.clear();
  if (eos_ >= 0) end_ids_.push_back(eos_);
  if (eot_ >= 0 && eot_ != eos_) end_ids_.push_back(eot_);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (!isSpecialType(types_[i])) continue;
    specials_.add(pieces_[i], id);
    const bool turn_end =
        std::find(kTurnEndTexts.begin(), kTurnEndTexts.end(), pieces_[i]) != kTurnEndTexts.end();
    if (turn_end && std::find(end_ids_.begin(), end_ids_.end(), id) == end_ids_.end()) end_ids_.push_back(id);
  }
}

// ---- Tokenizer ----

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocabSize()) throw TokenizerError("token id " + std::to_string(id) + " out of range");
    out += tokenBytes(id);
  }
  // sentencepiece's dummy prefix: the space encode() put before the text is
  // not part of it. Drop it when the first text-bearing token starts with one.
  const auto* spm = dynamic_cast<const SpmTokenizer*>(this);
  if (spm && spm->addsSpacePrefix() && !out.empty() && out[0] == ' ') {
    const auto first_text = std::find_if(ids.begin(), ids.end(), [&](int32_t id) {
      return type(id) != TokenType::Control && type(id) != TokenType::Unused;
    });
    if (first_text != ids.end() && type(*first_text) == TokenType::Normal &&
        piece(*first_text).rfind("\xE2\x96\x81", 0) == 0)
      out.erase(0, 1);
  }
  return out;
}

bool Tokenizer::isEndOfGeneration(int32_t id) const {
  return id >= 0 && std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
}

std::unique_ptr<Tokenizer> Tokenizer::fromVocab(const VocabData& vocab) {
  if (vocab.model == "llama") return std::make_unique<SpmTokenizer>(vocab);
  if (vocab.model == "gpt2") return std::make_unique<BpeTokenizer>(vocab);
  if (vocab.model == "gemma4") return std::make_unique<Gemma4Tokenizer>(vocab);
  throw TokenizerError("unsupported tokenizer.ggml.model \"" + vocab.model +
                       "\" (supported: llama, gpt2, gemma4)");
}

std::unique_ptr<Tokenizer> Tokenizer::fromGguf(const gguf::GgufFile& file) {
  try {
    return fromVocab(VocabData::fromGguf(file));
  } catch (const gguf::GgufError& e) {
    throw TokenizerError(std::string("tokenizer metadata: ") + e.what());
  }
}

}  // namespace moe
