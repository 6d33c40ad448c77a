// Per-family chat templates (we do not run the GGUF's Jinja text; see
// docs/ENGINE.md for why and how a family is chosen).
#pragma once

#include <string>
#include <vector>

#include "inference/tokenizer/tokenizer.h"
#include "models/gguf.h"

namespace moe {

// Qwen35: ChatML with Qwen3.5's reasoning block (the generation prompt opens
// "<think>\n"; earlier replies are carried without their reasoning).
// MiniMax: MiniMax-M2's turns ("]~b]user\n" ... "[e~[\n") with its reasoning block, the
// same as Qwen35's after the generation prompt "]~b]ai\n<think>\n".
// Gemma4: Gemma 4's turns (<|turn>role ... <turn|>) with its thinking switched off.
enum class ChatFamily { Mixtral, ChatML, DeepSeek, Olmoe, Glm, Harmony, Qwen35, MiniMax, Gemma4 };

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// A templated prompt in the order it is read: the template's own text (whose
// markers, "<|im_start|>", "[INST]", ..., become control tokens where the
// vocabulary has them) and the messages' content (what a person typed or
// pasted, the system prompt, earlier replies), which is only ever text.
class ChatPrompt {
 public:
  void markup(std::string text) { add(std::move(text), true); }
  void content(std::string text) { add(std::move(text), false); }
  // The whole prompt as one string (what the templates are pinned by in tests).
  std::string text() const;
  // The pieces for Tokenizer::encodePieces: markers parsed in the markup only.
  std::vector<TextPiece> pieces() const;

 private:
  void add(std::string text, bool is_markup);
  struct Part {
    std::string text;
    bool is_markup;
  };
  std::vector<Part> parts_;
};

// Template options beyond the messages.
struct ChatOptions {
  // Qwen35, MiniMax: false is the template's enable_thinking=false, an empty reasoning
  // block closed in the prompt, so the model answers at once. Other families ignore it.
  bool thinking = true;
};

const char* chatFamilyName(ChatFamily f);
// Whether the family's template has the thinking switch (ChatOptions::thinking).
bool chatHasThinkingSwitch(ChatFamily f);
// From general.architecture, refined by tokenizer.chat_template when present.
ChatFamily chatFamilyFor(const gguf::GgufFile& file);
// The prompt text for `messages`, ending with the assistant's turn opening when
// add_generation_prompt. BOS is not included (the tokenizer adds it).
ChatPrompt chatPrompt(ChatFamily family, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                      const ChatOptions& options = {});
std::string applyChatTemplate(ChatFamily family, const std::vector<ChatMessage>& messages,
                              bool add_generation_prompt, const ChatOptions& options = {});
// The prompt's token ids: the template's markers as control tokens, the
// messages' text as text even where it spells a marker, so typed text can never
// open a turn, a channel or a system message.
std::vector<int32_t> encodeChat(const Tokenizer& tokenizer, ChatFamily family,
                                const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                const ChatOptions& options = {});
// Strings that end the assistant's turn in this family (stop strings).
std::vector<std::string> chatStopStrings(ChatFamily family);

}  // namespace moe
