#include "app/core/harmony_reply.h"

namespace moe {
namespace {

// Harmony's markers are short; a "<|" not closed within this many characters is text.
constexpr size_t kMaxMarker = 32;

}  // namespace

std::string HarmonyReply::push(std::string_view raw) {
  pending_ += raw;
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t open = pending_.find("<|", pos);
    if (open == std::string::npos) {
      // A last "<" may begin a marker: held for the next piece.
      const size_t end = !pending_.empty() && pending_.back() == '<' ? pending_.size() - 1 : pending_.size();
      if (end > pos) out += bodyText(std::string_view(pending_).substr(pos, end - pos));
      pending_.erase(0, end);
      return out;
    }
    if (open > pos) out += bodyText(std::string_view(pending_).substr(pos, open - pos));
    const size_t close = pending_.find("|>", open + 2);
    if (close == std::string::npos || close + 2 - open > kMaxMarker) {
      if (close == std::string::npos && pending_.size() - open < kMaxMarker) {  // cut: wait for the rest
        pending_.erase(0, open);
        return out;
      }
      out += bodyText("<|");  // not a marker
      pos = open + 2;
      continue;
    }
    marker(std::string_view(pending_).substr(open, close + 2 - open));
    pos = close + 2;
  }
}

std::string HarmonyReply::finish() {
  std::string rest;
  rest.swap(pending_);
  return bodyText(rest);
}

void HarmonyReply::marker(std::string_view m) {
  if (m == "<|channel|>" || m == "<|start|>") {
    part_ = Part::Header;  // a channel name (or a role, then a channel) follows
    if (m == "<|start|>") header_.clear();
    header_ += ' ';
  } else if (m == "<|message|>") {
    part_ = Part::Body;
    // analysis: reasoning; commentary: tool preambles and calls; final: the answer.
    thinking_ =
        header_.find("analysis") != std::string::npos || header_.find("commentary") != std::string::npos;
    header_.clear();
  } else if (m == "<|end|>" || m == "<|return|>" || m == "<|call|>") {
    part_ = Part::Body;
    thinking_ = false;
  }
  // Any other marker (<|constrain|>, ...) is structure, not text.
}

std::string HarmonyReply::bodyText(std::string_view text) {
  if (text.empty()) return {};
  if (part_ == Part::Header) {
    header_ += text;
    return {};
  }
  return thinking_ ? shown_.reasoning(text) : shown_.answer(text);
}

}  // namespace moe
