// The "llama" GGUF vocabulary (SentencePiece BPE with byte fallback), encoded by
// the sentencepiece library from a ModelProto we build in memory from the GGUF
// pieces (facts: shared/GGUF-NOTES.md, "A SentencePiece ModelProto from a
// llama-style vocab").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "inference/tokenizer/tokenizer_common.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace moe {

class SpmTokenizer : public TokenizerCommon {
 public:
  explicit SpmTokenizer(const VocabData& vocab);
  ~SpmTokenizer() override;

  // Normal pieces with U+2581 turned into spaces, <0xXX> byte pieces as the
  // byte, the unknown piece as " \u2047 " (sentencepiece's unk surface), "" for
  // control and unused pieces.
  std::string tokenBytes(int32_t id) const override;

  // True when encode() prefixes text with a space (add_space_prefix): decode()
  // then drops the one leading space, as sentencepiece's Decode does.
  bool addsSpacePrefix() const { return add_space_prefix_; }

  // The serialized sentencepiece ModelProto for `vocab` (exposed for tests).
  static std::string buildModelProto(const VocabData& vocab, bool add_dummy_prefix);

  // Only a run that starts at byte 0 of the text gets the dummy-prefix space;
  // text after a marker does not (so "<s>[INST]" gives "[" not "▁["). This
  // follows llama.cpp's original SPM path; later llama.cpp versions also prefix
  // a fragment that follows a special token (as Hugging Face's legacy Llama
  // tokenizer does). User-defined pieces are matched by sentencepiece itself
  // even in plain text.
  void encodeRun(std::string_view run, bool at_text_start, std::vector<int32_t>& out) const override;

 private:
  void appendIds(std::string_view text, const sentencepiece::SentencePieceProcessor& sp,
                 std::vector<int32_t>& out) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> with_prefix_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> without_prefix_;
  bool add_space_prefix_ = true;
};

}  // namespace moe
