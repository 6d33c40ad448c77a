// What both tokenizer kinds share: the special-token splitter and the loading
// of pieces, types and special ids from VocabData (implemented in tokenizer.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "inference/tokenizer/tokenizer.h"

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
 public:
  std::vector<PromptRun> runs(std::span<const TextPiece> pieces) const override;

 protected:
  // Validates lengths and ids (TokenizerError) and fills pieces, types, special
  // ids, end-of-generation ids and the special-token matcher.
  void loadCommon(const VocabData& vocab);
  SpecialTokenMatcher specials_;
};

}  // namespace moe
