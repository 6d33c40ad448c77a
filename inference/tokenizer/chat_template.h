// Per-family chat templates (we do not run the GGUF's Jinja text; see
// docs/ENGINE.md for why and how a family is chosen).
#pragma once

#include <string>
#include <vector>

#include "models/gguf.h"

namespace moe {

enum class ChatFamily { Mixtral, ChatML, DeepSeek, Olmoe, Glm, Harmony };

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

const char* chatFamilyName(ChatFamily f);
// From general.architecture, refined by tokenizer.chat_template when present.
ChatFamily chatFamilyFor(const gguf::GgufFile& file);
// The prompt text for `messages`, ending with the assistant's turn opening when
// add_generation_prompt. BOS is not included (the tokenizer adds it).
std::string applyChatTemplate(ChatFamily family, const std::vector<ChatMessage>& messages,
                              bool add_generation_prompt);
// Strings that end the assistant's turn in this family (stop strings).
std::vector<std::string> chatStopStrings(ChatFamily family);

}  // namespace moe
