// The "llama" GGUF vocabulary (SentencePiece BPE with byte fallback), encoded by
// the sentencepiece library from a ModelProto we build in memory from the GGUF
// pieces (facts: shared/GGUF-NOTES.md, "A SentencePiece ModelProto from a
// llama-style vocab").
//
// This header also holds the two helpers both tokenizer kinds share
// (TokenizerCommon, SpecialTokenMatcher); they are implemented in tokenizer.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "inference/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace moe {

// Splits text on the texts of control and user-defined tokens (the
// parse_special path). At each position the longest matching token wins.
class SpecialTokenMatcher {
 public:
  struct Fragment {
    std::string_view text;  // raw text (id < 0) or the token's text
    int32_t id = -1;        // the special token, or -1 for raw text
    size_t offset = 0;      // byte offset of the fragment in the input
  };

  void add(std::string text, int32_t id);
  bool empty() const { return by_first_byte_.empty(); }
  std::vector<Fragment> split(std::string_view text) const;

 private:
  // Candidates per first byte, longest first.
  std::unordered_map<unsigned char, std::vector<std::pair<std::string, int32_t>>> by_first_byte_;
};

// Fields both tokenizer kinds fill from VocabData the same way.
class TokenizerCommon : public Tokenizer {
 protected:
  // Validates lengths and ids (TokenizerError) and fills pieces, types, special
  // ids, end-of-generation ids and the special-token matcher.
  void loadCommon(const VocabData& vocab);
  SpecialTokenMatcher specials_;
};

class SpmTokenizer : public TokenizerCommon {
 public:
  explicit SpmTokenizer(const VocabData& vocab);
  ~SpmTokenizer() override;

  // parse_special: only a raw-text fragment that starts at byte 0 of `text`
  // gets the dummy-prefix space; text after a special token does not (so
  // "<s>[INST]" gives "[" not "▁["). This follows llama.cpp's original SPM
  // path; later llama.cpp versions also prefix a fragment that follows a
  // special token (as Hugging Face's legacy Llama tokenizer does).
  // User-defined pieces are matched by sentencepiece itself even without
  // parse_special.
  std::vector<int32_t> encode(std::string_view text, bool add_bos,
                              bool parse_special) const override;
  // Normal pieces with U+2581 turned into spaces, <0xXX> byte pieces as the
  // byte, the unknown piece as " \u2047 " (sentencepiece's unk surface), "" for
  // control and unused pieces.
  std::string tokenBytes(int32_t id) const override;

  // True when encode() prefixes text with a space (add_space_prefix): decode()
  // then drops the one leading space, as sentencepiece's Decode does.
  bool addsSpacePrefix() const { return add_space_prefix_; }

  // The serialized sentencepiece ModelProto for `vocab` (exposed for tests).
  static std::string buildModelProto(const VocabData& vocab, bool add_dummy_prefix);

 private:
  void appendIds(std::string_view text, const sentencepiece::SentencePieceProcessor& sp,
                 std::vector<int32_t>& out) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> with_prefix_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> without_prefix_;
  bool add_space_prefix_ = true;
};

}  // namespace moe
