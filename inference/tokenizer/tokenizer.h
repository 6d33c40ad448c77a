// Text <-> token ids for the two GGUF vocabulary kinds: "llama" (SentencePiece,
// through the sentencepiece library) and "gpt2" (byte-level BPE, our own code).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "models/gguf.h"
#include "models/vocab.h"

namespace moe {

class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// GGUF tokenizer.ggml.token_type values (they coincide with SentencePiece's).
enum class TokenType : int32_t {
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

// A stretch of the text to encode. In a stretch with `markers`, control and
// user-defined token texts (e.g. "<|im_start|>") become their ids; in any other
// stretch they are plain text, whatever it holds.
struct TextPiece {
  std::string_view text;
  bool markers = false;
};

// One stretch of a prompt as the tokenizer cuts it: a marker token, or the run of
// plain text between two markers.
struct PromptRun {
  std::string text;            // the plain text (marker < 0)
  int32_t marker = -1;         // the marker's id, or -1 for a run of text
  bool at_text_start = false;  // the run begins the whole text (sentencepiece's dummy prefix)
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Encodes the concatenation of `pieces`: the text between two marker ids is
  // encoded as one run, wherever the pieces' borders fall, so a prompt split
  // into pieces gives the ids of the same text encoded whole. Adds BOS first when
  // add_bos is true and the vocabulary has one. It is runs() with each run encoded
  // by encodeRun(), in order.
  std::vector<int32_t> encodePieces(std::span<const TextPiece> pieces, bool add_bos) const;
  // The concatenation of `pieces` cut at its markers (found in marker pieces only).
  virtual std::vector<PromptRun> runs(std::span<const TextPiece> pieces) const = 0;
  // Appends the ids of one run of plain text. A run's ids depend on its text and on
  // at_text_start only, never on the runs around it: the contract ChatTokenCache
  // (chat_tokens.h) relies on to keep a run's ids from one prompt to the next.
  virtual void encodeRun(std::string_view run, bool at_text_start, std::vector<int32_t>& out) const = 0;
  // Encodes text. With parse_special, control and user-defined token texts in
  // `text` become their ids; otherwise they are plain text. Text a person typed
  // or pasted, or a model wrote, is never parsed for them (see encodeChat).
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const {
    const TextPiece whole{text, parse_special};
    return encodePieces({&whole, 1}, add_bos);
  }
  // The bytes one token stands for (may be part of a UTF-8 sequence; empty for
  // control tokens).
  virtual std::string tokenBytes(int32_t id) const = 0;
  // tokenBytes, but a control token as its text ("<|channel|>"): for chat formats
  // whose structure a reader must see (gpt-oss's harmony channels).
  std::string tokenText(int32_t id) const {
    return type(id) == TokenType::Control ? piece(id) : tokenBytes(id);
  }
  std::string decode(std::span<const int32_t> ids) const;

  int32_t vocabSize() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_.at(static_cast<size_t>(id)); }
  TokenType type(int32_t id) const { return types_.at(static_cast<size_t>(id)); }
  int32_t bos() const { return bos_; }  // -1 when absent
  int32_t eos() const { return eos_; }
  int32_t eot() const { return eot_; }  // end of turn, -1 when absent
  bool addBosDefault() const { return add_bos_; }
  // True for ids that end generation (eos, eot, and control tokens the chat
  // template uses as turn ends).
  bool isEndOfGeneration(int32_t id) const;

  // Builds the tokenizer the vocabulary names ("llama" or "gpt2"). Throws TokenizerError.
  static std::unique_ptr<Tokenizer> fromVocab(const VocabData& vocab);
  static std::unique_ptr<Tokenizer> fromGguf(const gguf::GgufFile& file);

 protected:
  std::vector<std::string> pieces_;
  std::vector<TokenType> types_;
  int32_t bos_ = -1, eos_ = -1, eot_ = -1, unk_ = -1, pad_ = -1;
  bool add_bos_ = false;
  std::vector<int32_t> end_ids_;  // eos/eot and template turn-end tokens
};

}  // namespace moe
