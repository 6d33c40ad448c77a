// The search over chats: the user's words as an FTS5 query, and the query run
// against the messages of live conversations (ConversationStore::search).
#include <string>
#include <vector>

#include "app/core/conversation_store.h"

namespace moe {
namespace {

bool isQueryNoise(unsigned char c) { return c < 0x20 || c == 0x7f; }

}  // namespace

std::string ftsQueryFromUserText(const std::string& user_query) {
  // Words are split on ASCII white space and control characters; each becomes
  // an FTS5 string ("..." with " doubled), which FTS5 never parses as an
  // operator, column filter or bracket. Punctuation inside a word is left to
  // the tokenizer, exactly as when the text was indexed. Adjacent strings mean
  // AND; a * after the last one makes it a prefix match.
  std::vector<std::string> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) words.push_back(std::move(word));
    word.clear();
  };
  for (char ch : user_query) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c == ' ' || isQueryNoise(c))
      flush();
    else
      word += ch;
  }
  flush();
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (!out.empty()) out += ' ';
    out += '"';
    for (char ch : words[i]) {
      if (ch == '"') out += '"';
      out += ch;
    }
    out += '"';
  }
  if (!out.empty()) out += '*';
  return out;
}

// ---- search ----

std::vector<SearchHit> ConversationStore::search(const std::string& user_query, int limit) {
  std::vector<SearchHit> out;
  const std::string match = ftsQueryFromUserText(user_query);
  if (match.empty() || limit <= 0) return out;
  auto st = db_.prepare(
      "SELECT m.conversation_id, m.id, c.title, snippet(messages_fts, 0, ?3, ?4, '\xE2\x80\xA6', 16) "
      "FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid "
      "JOIN conversations c ON c.id = m.conversation_id "
      "WHERE messages_fts MATCH ?1 AND c.deleted_at IS NULL ORDER BY rank, m.id LIMIT ?2");
  st.bindText(1, match).bindInt64(2, limit);
  st.bindText(3, std::string(1, kMatchBegin)).bindText(4, std::string(1, kMatchEnd));
  while (st.step()) {
    SearchHit h;
    h.conversation_id = st.columnInt64(0);
    h.message_id = st.columnInt64(1);
    h.conversation_title = st.columnText(2);
    h.snippet = st.columnText(3);
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace moe
