// Chat replies read as they stream: a model that reasons before it answers (gpt-oss's
// analysis channel, Qwen3.5's <think> block) has its reasoning shown as a quoted
// "Thinking" block and the answer after it, without the format's markers. The chat
// templates (inference/tokenizer/chat_template.cpp) recognise that block in earlier
// replies and carry them in the next prompt as each format asks. Qt-free.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "inference/generator.h"
#include "inference/tokenizer/chat_template.h"

namespace moe {

// The first line of the quoted block a reply's reasoning is shown in.
inline constexpr std::string_view kThinkingHeader = "> **Thinking**";

// The Markdown of a reply with reasoning: "> **Thinking**", the reasoning's lines
// each quoted with "> ", a blank line, then the answer. The quote opens with the
// first reasoning text, so a reply without reasoning shows only its answer.
class ThinkingMarkdown {
 public:
  std::string reasoning(std::string_view text);
  std::string answer(std::string_view text);

 private:
  bool quote_open_ = false;  // a newline continues the quote
};

class ReplyReader {
 public:
  virtual ~ReplyReader() = default;
  // The displayable Markdown for the next piece of the raw stream (possibly empty:
  // a marker may be cut between pieces and is held until it is whole).
  virtual std::string push(std::string_view raw) = 0;
  // What is still held at the end of the reply.
  virtual std::string finish() = 0;
};

// The reader of `family`'s replies to a prompt rendered with `options`, with `params`
// set as it needs them (control tokens as their text, where the reply ends); null for
// the families whose replies are shown as they come.
std::unique_ptr<ReplyReader> replyReaderFor(ChatFamily family, GenerationParams& params,
                                            const ChatOptions& options = {});

}  // namespace moe
