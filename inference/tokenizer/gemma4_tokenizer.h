// The "gemma4" GGUF vocabulary (Gemma 4; llama.cpp's converter writes it from the
// model's tokenizer.json, conversion/gemma.py Gemma4Model.set_vocab): a BPE over
// SentencePiece-style pieces, as llama.cpp reads it (LLAMA_VOCAB_PRE_TYPE_GEMMA4 in
// src/llama-vocab.cpp, facts read there and in public notes on it; the code is ours):
//   - every space becomes U+2581 "▁" (no dummy prefix: add_space_prefix is false);
//   - the text splits only into runs of newlines and runs of anything else
//     ([^\n]+|[\n]+); a newline run that is a token is that token;
//   - each run starts as its UTF-8 characters (no byte-level remapping) and merges
//     the adjacent pair of lowest rank in tokenizer.ggml.merges ("a b", rank =
//     position), the leftmost first among equals, until no pair merges;
//   - a final piece without a token falls back to its bytes as <0xXX> tokens (the
//     unknown token where a byte has none).
// Decoding turns ▁ back into spaces and byte tokens into their bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "inference/tokenizer/tokenizer_common.h"

namespace moe {

class Gemma4Tokenizer : public TokenizerCommon {
 public:
  explicit Gemma4Tokenizer(const VocabData& vocab);

  // ▁ as a space, <0xXX> as its byte, control tokens "", user-defined as their text.
  std::string tokenBytes(int32_t id) const override;
  size_t mergeCount() const { return ranks_.size(); }

  void encodeRun(std::string_view run, bool at_text_start, std::vector<int32_t>& out) const override;

 private:
  void appendRun(std::string_view run, std::vector<int32_t>& out) const;  // one escaped run

  std::unordered_map<std::string, int32_t> ids_by_text_;  // later ids win, as llama.cpp's map
  std::unordered_map<std::string, int32_t> ranks_;        // "left right" -> merge rank
  std::array<int32_t, 256> byte_ids_{};                   // <0xXX> per byte, -1 if none
  std::vector<std::string> token_bytes_;                  // decoded bytes per id
};

}  // namespace moe
