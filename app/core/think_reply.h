// A Qwen3.5 / Qwen3.6 reply (ChatFamily::Qwen35), read as it streams. The prompt ends
// by opening the reasoning block ("<|im_start|>assistant\n<think>\n"), so the reply
// begins inside it: the model reasons, closes the block with "</think>", then answers,
//   reasoning...\n</think>\n\nanswer...
// The chat shows the reasoning as a quoted "Thinking" block (app/core/reply_reader.h)
// and the answer after it, without the markers and the newlines around them (the
// template strips those too); an empty reasoning block shows nothing. Qt-free.
#pragma once

#include <string>
#include <string_view>

#include "app/core/reply_reader.h"

namespace moe {

class ThinkReply : public ReplyReader {
 public:
  // starts_in_reasoning: the prompt opened the block (Qwen3.5's generation prompt does).
  explicit ThinkReply(bool starts_in_reasoning = true) : thinking_(starts_in_reasoning) {}
  std::string push(std::string_view raw) override;
  std::string finish() override;

 private:
  std::string text(std::string_view t);
  void marker(std::string_view m, std::string& out);

  std::string pending_;          // raw text not read yet: a marker's beginning
  bool thinking_;                // reading the reasoning
  bool part_started_ = false;    // text of the current part was shown (leading newlines are dropped)
  bool answer_started_ = false;  // text of the answer was shown: a later <think> is text
  std::string held_newlines_;    // the reasoning's trailing newlines: dropped before </think>
  ThinkingMarkdown shown_;
};

}  // namespace moe
