// A conversation as a Markdown document (for reading and pasting) and as JSON
// (for tools and re-import), written by hand without a JSON library. Qt-free.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "app/core/conversation_store.h"

namespace moe {

std::string conversationToMarkdown(const Conversation& conv, const std::vector<Message>& messages);

// {"format": "moechat-conversation", "version": 1, "title": ..., "messages": [...]}; see docs/STORAGE.md.
std::string conversationToJson(const Conversation& conv, const std::vector<Message>& messages);

// s as a JSON string literal, quotes included: ", \ and control characters
// escaped, valid UTF-8 passed through as is, each invalid byte replaced by U+FFFD.
std::string jsonQuote(std::string_view s);

// Unix ms as "2026-11-22 12:34:56 UTC".
std::string formatUtc(int64_t unix_ms);

}  // namespace moe
