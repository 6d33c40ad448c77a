// tokenizer.ggml.* keys <-> VocabData. Key names and token type numbers: ggml
// docs/gguf.md ("Tokenizer"), summarised in shared/GGUF-NOTES.md.
#include "models/vocab.h"

#include <string>

namespace moe {

namespace {

using gguf::GgufError;
using gguf::GgufFile;

constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kTokenTypes = "tokenizer.ggml.token_type";

// An optional per-token array must have one entry per token.
void checkLength(const char* key, size_t n, size_t n_tokens) {
  if (n != n_tokens) {
    throw GgufError(std::string(key) + " has " + std::to_string(n) + " entries, " + kTokens + " has " +
                    std::to_string(n_tokens));
  }
}

// A special token id: -1 when absent, else it must name a token.
int32_t readTokenId(const GgufFile& file, const char* key, size_t n_tokens) {
  const auto id = file.getInt(key);
  if (!id) return -1;
  if (*id < 0 || static_cast<uint64_t>(*id) >= n_tokens) {
    throw GgufError(std::string(key) + " = " + std::to_string(*id) + " is outside the vocabulary of " +
                    std::to_string(n_tokens) + " tokens");
  }
  return static_cast<int32_t>(*id);
}

std::vector<float> readScores(const GgufFile& file, size_t n_tokens) {
  std::vector<float> scores;
  if (auto s = file.getFloatArray(kScores)) {
    checkLength(kScores, s->size(), n_tokens);
    scores.assign(s->begin(), s->end());
  }
  return scores;
}

// Token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte (0 undefined).
std::vector<int32_t> readTokenTypes(const GgufFile& file, size_t n_tokens) {
  std::vector<int32_t> types;
  if (auto t = file.getIntArray(kTokenTypes)) {
    checkLength(kTokenTypes, t->size(), n_tokens);
    types.reserve(t->size());
    for (size_t i = 0; i < t->size(); ++i) {
      const int64_t v = (*t)[i];
      if (v < 0 || v > 6) {
        throw GgufError(std::string(kTokenTypes) + "[" + std::to_string(i) + "] = " + std::to_string(v) +
                        " is not a token type (0..6)");
      }
      types.push_back(static_cast<int32_t>(v));
    }
  }
  return types;
}

}  // namespace

VocabData VocabData::fromGguf(const GgufFile& file) {
  VocabData v;
  auto model = file.getString("tokenizer.ggml.model");
  if (!model) throw GgufError("missing tokenizer.ggml.model");
  v.model = std::move(*model);
  auto tokens = file.getStringArray(kTokens);
  if (!tokens || tokens->empty()) throw GgufError(std::string("missing or empty ") + kTokens);
  v.tokens = std::move(*tokens);
  const size_t n = v.tokens.size();
  v.pre = file.getString("tokenizer.ggml.pre").value_or("");
  v.scores = readScores(file, n);
  v.token_types = readTokenTypes(file, n);
  v.merges = file.getStringArray("tokenizer.ggml.merges").value_or(std::vector<std::string>{});
  v.bos_id = readTokenId(file, "tokenizer.ggml.bos_token_id", n);
  v.eos_id = readTokenId(file, "tokenizer.ggml.eos_token_id", n);
  v.unk_id = readTokenId(file, "tokenizer.ggml.unknown_token_id", n);
  v.pad_id = readTokenId(file, "tokenizer.ggml.padding_token_id", n);
  v.eot_id = readTokenId(file, "tokenizer.ggml.eot_token_id", n);
  v.add_bos = file.getBool("tokenizer.ggml.add_bos_token").value_or(v.add_bos);
  v.add_space_prefix = file.getBool("tokenizer.ggml.add_space_prefix").value_or(v.add_space_prefix);
  v.remove_extra_whitespaces =
      file.getBool("tokenizer.ggml.remove_extra_whitespaces").value_or(v.remove_extra_whitespaces);
  v.chat_template = file.getString("tokenizer.chat_template").value_or("");
  return v;
}

void VocabData::writeTo(gguf::GgufWriter& writer) const {
  writer.setString("tokenizer.ggml.model", model);
  if (!pre.empty()) writer.setString("tokenizer.ggml.pre", pre);
  writer.setStringArray(kTokens, tokens);
  if (!scores.empty()) writer.setFloat32Array(kScores, scores);
  if (!token_types.empty()) writer.setInt32Array(kTokenTypes, token_types);
  if (!merges.empty()) writer.setStringArray("tokenizer.ggml.merges", merges);
  // Special ids are u32 in real files (gguf-py writes them with add_uint32).
  auto putId = [&](const char* key, int32_t id) {
    if (id >= 0) writer.setUint32(key, static_cast<uint32_t>(id));
  };
  putId("tokenizer.ggml.bos_token_id", bos_id);
  putId("tokenizer.ggml.eos_token_id", eos_id);
  putId("tokenizer.ggml.unknown_token_id", unk_id);
  putId("tokenizer.ggml.padding_token_id", pad_id);
  putId("tokenizer.ggml.eot_token_id", eot_id);
  writer.setBool("tokenizer.ggml.add_bos_token", add_bos);
  writer.setBool("tokenizer.ggml.add_space_prefix", add_space_prefix);
  writer.setBool("tokenizer.ggml.remove_extra_whitespaces", remove_extra_whitespaces);
  if (!chat_template.empty()) writer.setString("tokenizer.chat_template", chat_template);
}

}  // namespace moe
