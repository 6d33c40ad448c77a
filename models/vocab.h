// The tokenizer.ggml.* content of a GGUF file as plain data: what the synthetic
// generator writes and what the tokenizers are built from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/gguf.h"

namespace moe {

struct VocabData {
  std::string model;                 // tokenizer.ggml.model: "llama" or "gpt2"
  std::string pre;                   // tokenizer.ggml.pre (gpt2 only), e.g. "qwen2", "llama-bpe"
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens
  std::vector<float> scores;         // tokenizer.ggml.scores (may be empty for gpt2)
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (1 normal .. 6 byte)
  std::vector<std::string> merges;   // tokenizer.ggml.merges ("a b"), gpt2 only
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1, eot_id = -1;
  bool add_bos = true;                    // tokenizer.ggml.add_bos_token
  bool add_space_prefix = true;           // tokenizer.ggml.add_space_prefix (llama)
  bool remove_extra_whitespaces = false;  // tokenizer.ggml.remove_extra_whitespaces
  std::string chat_template;              // tokenizer.chat_template (informational)

  // Reads the keys; throws gguf::GgufError on missing tokens or inconsistent
  // array lengths / ids out of range.
  static VocabData fromGguf(const gguf::GgufFile& file);
  void writeTo(gguf::GgufWriter& writer) const;
};

}  // namespace moe
