// Vocabularies for the chat template tests: every family's markers, as the models'
// published templates and vocabularies spell them, added as control tokens to a
// synthetic vocabulary of each kind (tests/engine/test_chat_template.cpp,
// test_chat_tokens.cpp).
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "inference/tokenizer/chat_template.h"
#include "inference/tokenizer/tokenizer.h"
#include "synth/synthetic_vocab.h"

namespace moe::test {

inline const std::string kDeepSeekEos =
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";

// Each family's markers, as the models' published templates and vocabularies spell them.
inline std::vector<std::string> markersOf(ChatFamily family) {
  switch (family) {
    case ChatFamily::Mixtral: return {"[INST]", "[/INST]", "<s>", "</s>"};
    case ChatFamily::ChatML: return {"<|im_start|>", "<|im_end|>", "<|endoftext|>"};
    case ChatFamily::DeepSeek: return {kDeepSeekEos};
    case ChatFamily::Olmoe: return {"<|system|>", "<|user|>", "<|assistant|>", "<|endoftext|>"};
    case ChatFamily::Glm:
      return {"[gMASK]",       "<sop>",           "<|system|>",   "<|user|>",
              "<|assistant|>", "<|observation|>", "<|endoftext|>"};
    case ChatFamily::Harmony:
      return {"<|start|>",  "<|message|>", "<|end|>",      "<|channel|>",
              "<|return|>", "<|call|>",    "<|constrain|>"};
    // Qwen3.5's vocabulary: <think> and </think> are user-defined tokens, which the
    // tokenizer treats as markers as it does control tokens.
    case ChatFamily::Qwen35: return {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"};
    // MiniMax-M2's vocabulary: its BOS, the turn opener and closer, the reasoning block.
    case ChatFamily::MiniMax: return {"]~!b[", "]~b]", "[e~[", "<think>", "</think>"};
    case ChatFamily::Gemma4: return {"<|turn>", "<turn|>", "<|channel>", "<channel|>"};
  }
  return {};
}

inline const std::vector<ChatFamily> kChatFamilies = {
    ChatFamily::Mixtral, ChatFamily::ChatML, ChatFamily::DeepSeek, ChatFamily::Olmoe, ChatFamily::Glm,
    ChatFamily::Harmony, ChatFamily::Qwen35, ChatFamily::MiniMax,  ChatFamily::Gemma4};

// `v` with every family's markers added as control tokens (those it lacks).
inline std::unique_ptr<Tokenizer> withEveryMarker(VocabData v) {
  for (ChatFamily f : kChatFamilies) {
    for (const auto& m : markersOf(f)) {
      if (std::find(v.tokens.begin(), v.tokens.end(), m) != v.tokens.end()) continue;
      v.tokens.push_back(m);
      v.token_types.push_back(static_cast<int32_t>(TokenType::Control));
      if (!v.scores.empty()) v.scores.push_back(0.0f);
    }
  }
  return Tokenizer::fromVocab(v);
}

// A vocabulary of the given kind with every family's markers as control tokens.
inline std::unique_ptr<Tokenizer> tokenizerWithEveryMarker(bool sentencepiece) {
  return withEveryMarker(sentencepiece ? buildSpmVocab(512) : buildGpt2Vocab(400, "qwen2"));
}

}  // namespace moe::test
