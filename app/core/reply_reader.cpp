#include "app/core/reply_reader.h"

#include "app/core/harmony_reply.h"
#include "app/core/think_reply.h"

namespace moe {

std::string ThinkingMarkdown::reasoning(std::string_view text) {
  if (text.empty()) return {};
  std::string out;
  if (!quote_open_) {
    out += std::string(kThinkingHeader) + "\n> ";
    quote_open_ = true;
  }
  for (char c : text) out += c == '\n' ? std::string("\n> ") : std::string(1, c);
  return out;
}

std::string ThinkingMarkdown::answer(std::string_view text) {
  if (text.empty()) return {};
  std::string out;
  if (quote_open_) {
    out += "\n\n";
    quote_open_ = false;
  }
  out += text;
  return out;
}

std::unique_ptr<ReplyReader> replyReaderFor(ChatFamily family, GenerationParams& params,
                                            const ChatOptions& options) {
  switch (family) {
    case ChatFamily::Harmony:
      // The channels are read from the control tokens' text, and the reply ends at
      // <|return|> or <|call|> (its <|end|> closes only the reasoning).
      params.special_token_text = true;
      params.stop_at_end_token = false;
      return std::make_unique<HarmonyReply>();
    case ChatFamily::Qwen35:
    case ChatFamily::MiniMax:  // the same block after "]~b]ai\n<think>\n"; it ends at [e~[
      // <think> and </think> are user-defined tokens in Qwen3.5's vocabulary and reach
      // the stream as their text; a file whose converter typed them control gives them
      // as text too. The reply ends at <|im_end|>, the end token, as in ChatML. Without
      // thinking the prompt closed the block: the reply is the answer.
      params.special_token_text = true;
      return std::make_unique<ThinkReply>(options.thinking);
    default: return nullptr;
  }
}

}  // namespace moe
