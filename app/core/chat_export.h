// A conversation as a Markdown document (for reading and pasting) and as JSON
// (for tools and re-import), written by hand without a JSON library. Qt-free.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "app/core/conversation_store.h"

namespace moe {

// `messages` as ConversationStore::messagesWithAlternatives gives them: a turn's
// replies are each marked "reply i of n", the shown one named, each reply with the
// model and sampling that wrote it.
std::string conversationToMarkdown(const Conversation& conv, const std::vector<Message>& messages);

// {"format": "moechat-conversation", "version": 2, "title": ..., "messages": [...]}; each message
// with its turn, whether it is the shown reply, and for replies the model and sampling; see
// docs/STORAGE.md.
std::string conversationToJson(const Conversation& conv, const std::vector<Message>& messages);

// s as a JSON string literal, quotes included: ", \ and control characters
// escaped, valid UTF-8 passed through as is, each invalid byte replaced by U+FFFD.
std::string jsonQuote(std::string_view s);

// A file name to suggest for an exported chat: the title with what file systems
// refuse (/ \ : * ? " < > |, control characters, invalid UTF-8) removed, spaces
// collapsed, no leading or trailing dot or space, at most kMaxExportNameBytes
// before the extension (cut between characters), and "chat" when nothing is
// left; extension without its dot ("md").
inline constexpr size_t kMaxExportNameBytes = 80;
std::string exportFileName(std::string_view title, std::string_view extension);

// Unix ms as "2026-11-22 12:34:56 UTC".
std::string formatUtc(int64_t unix_ms);

}  // namespace moe
