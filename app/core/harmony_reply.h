// A gpt-oss reply in the "harmony" format, read as it streams (with its control
// tokens as text, GenerationParams::special_token_text): the model first reasons on
// its analysis channel, then answers on the final one,
//   <|channel|>analysis<|message|>...<|end|><|start|>assistant<|channel|>final<|message|>...
// The chat shows the reasoning as a quoted "Thinking" block and the answer after it,
// and none of the markers; a reply without channels is shown as it came.
// Qt-free; the harmony prompt drops the Thinking block again (chat_template.cpp).
#pragma once

#include <string>
#include <string_view>

#include "app/core/reply_reader.h"

namespace moe {

class HarmonyReply : public ReplyReader {
 public:
  std::string push(std::string_view raw) override;
  std::string finish() override;

 private:
  enum class Part { Header, Body };
  std::string bodyText(std::string_view text);
  void marker(std::string_view m);

  std::string pending_;  // raw text not processed yet: a marker's beginning
  Part part_ = Part::Body;
  std::string header_;     // between <|channel|> (or <|start|>) and <|message|>
  bool thinking_ = false;  // the body being read is reasoning (analysis, commentary)
  ThinkingMarkdown shown_;
};

}  // namespace moe
