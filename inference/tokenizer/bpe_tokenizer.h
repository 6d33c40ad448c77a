// The "gpt2" GGUF vocabulary: GPT-2 style byte-level BPE (tokens are byte
// strings spelled with GPT-2's byte->unicode table, merges "a b" ranked by
// their order), preceded by a regex pre-tokenizer chosen by tokenizer.ggml.pre.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "inference/tokenizer/tokenizer_common.h"

namespace moe {

namespace gpt2 {
// GPT-2's bytes_to_unicode() (openai/gpt-2, src/encoder.py): printable bytes
// '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves; the other 68 bytes,
// in increasing order, map to U+0100, U+0101, ... (so ' ' -> U+0120 'Ġ').
char32_t byteToCodepoint(uint8_t byte);
// The UTF-8 spelling of byteToCodepoint(byte).
const std::string& byteToUtf8(uint8_t byte);
// The inverse; -1 when `cp` is not in the table.
int codepointToByte(char32_t cp);
// Raw bytes -> byte-level spelling, and back (nullopt-like: false on failure).
std::string bytesToByteLevel(std::string_view bytes);
bool byteLevelToBytes(std::string_view byte_level, std::string& out);
}  // namespace gpt2

// Regex pre-tokenizer. Each name maps to the regexes published with the model
// (see bpe_tokenizer.cpp); several regexes apply in sequence, each splitting
// every piece into matches and the text between them (Hugging Face's Split
// with behavior "Isolated"). Unknown names fall back to "default" (GPT-2) and
// set warning(): we prefer running with a plausible split over refusing a model.
class PreTokenizer {
 public:
  explicit PreTokenizer(std::string_view pre_name);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Pieces in order; their concatenation is `text` (invalid UTF-8 included).
  std::vector<std::string_view> split(std::string_view text) const;
  const std::string& name() const { return name_; }        // the regex set used
  const std::string& warning() const { return warning_; }  // empty when `pre` was known
  static std::vector<std::string> knownNames();

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
  std::string name_, warning_;
};

class BpeTokenizer : public TokenizerCommon {
 public:
  explicit BpeTokenizer(const VocabData& vocab);
  ~BpeTokenizer() override;

  // Byte-level pieces decoded to raw bytes; control tokens ""; user-defined
  // tokens (stored as raw text by the converters) as they are.
  std::string tokenBytes(int32_t id) const override;

  const PreTokenizer& preTokenizer() const { return *pre_; }
  size_t mergeCount() const { return merges_.size(); }

  // No dummy prefix: every run is encoded the same wherever it starts.
  void encodeRun(std::string_view run, bool at_text_start, std::vector<int32_t>& out) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t pairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void loadMerges(const std::vector<std::string>& merges);
  void appendWord(std::string_view word, std::vector<int32_t>& out) const;
  std::vector<int32_t> mergeWord(std::string_view word) const;

  std::unique_ptr<PreTokenizer> pre_;
  std::unordered_map<std::string, int32_t> ids_by_text_;  // token text -> id
  std::array<int32_t, 256> byte_ids_{};                   // single-byte token per byte, -1 if none
  std::unordered_map<uint64_t, Merge> merges_;            // (left id, right id) -> rank, result
  std::vector<std::string> token_bytes_;                  // raw bytes per id

  // Per-word cache: chat text repeats words a lot. Guarded: encode() is const
  // and may run on several threads.
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace moe
