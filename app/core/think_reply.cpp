#include "app/core/think_reply.h"

#include <algorithm>

namespace moe {
namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

// The length of the longest end of `s` that begins a marker (held for the next piece).
size_t markerStartAtEnd(std::string_view s) {
  for (size_t n = std::min(s.size(), kClose.size() - 1); n > 0; --n) {
    const std::string_view tail = s.substr(s.size() - n);
    if (kOpen.starts_with(tail) || kClose.starts_with(tail)) return n;
  }
  return 0;
}

}  // namespace

std::string ThinkReply::push(std::string_view raw) {
  pending_ += raw;
  const std::string_view all = pending_;
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t open = all.find(kOpen, pos), close = all.find(kClose, pos);
    const size_t at = std::min(open, close);
    if (at == std::string_view::npos) {
      const size_t keep = markerStartAtEnd(all.substr(pos));
      out += text(all.substr(pos, all.size() - pos - keep));
      pending_.erase(0, all.size() - keep);
      return out;
    }
    out += text(all.substr(pos, at - pos));
    const std::string_view m = at == open ? kOpen : kClose;
    marker(m, out);
    pos = at + m.size();
  }
}

std::string ThinkReply::finish() {
  std::string rest;
  rest.swap(pending_);
  std::string out = text(rest);
  held_newlines_.clear();  // the end of unfinished reasoning
  return out;
}

void ThinkReply::marker(std::string_view m, std::string& out) {
  if (m == kClose && thinking_) {
    thinking_ = false;
    held_newlines_.clear();
    part_started_ = false;
  } else if (m == kOpen && !thinking_ && !answer_started_) {
    thinking_ = true;  // the model opened the block itself
    part_started_ = false;
  } else if (m == kOpen && thinking_ && !part_started_) {
    // opened again at the start of the reasoning: nothing to show
  } else {
    out += text(m);  // a marker inside the answer (or the reasoning) is text there
  }
}

std::string ThinkReply::text(std::string_view t) {
  if (!part_started_) {
    const size_t first = t.find_first_not_of('\n');
    if (first == std::string_view::npos) return {};
    t.remove_prefix(first);
    part_started_ = true;
  }
  if (t.empty()) return {};
  if (!thinking_) {
    answer_started_ = true;
    return shown_.answer(t);
  }
  // Newlines at the end of the reasoning so far wait: before </think> they are dropped.
  const size_t last = t.find_last_not_of('\n');
  if (last == std::string_view::npos) {
    held_newlines_ += t;
    return {};
  }
  std::string body;
  body.swap(held_newlines_);
  body += t.substr(0, last + 1);
  held_newlines_ = std::string(t.substr(last + 1));
  return shown_.reasoning(body);
}

}  // namespace moe
