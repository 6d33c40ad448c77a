#include "app/core/conversation_prompts.h"

#include <unordered_set>

namespace moe {
namespace {

std::string trimmed(const std::string& s) {
  const char* ws = " \t\r\n\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Every distinct non-blank user turn of a live conversation, newest first;
// stops after `limit` (negative: no limit).
std::vector<std::string> userTurns(AppDatabase& db, int limit) {
  auto st = db.db().prepare(
      "SELECT m.text FROM messages m JOIN conversations c ON c.id = m.conversation_id "
      "WHERE c.deleted_at IS NULL AND m.role = 'user' "
      "ORDER BY m.created_at DESC, m.id DESC");
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  while ((limit < 0 || int(out.size()) < limit) && st.step()) {
    std::string text = trimmed(st.columnText(0));
    if (text.empty() || !seen.insert(text).second) continue;
    out.push_back(std::move(text));
  }
  return out;
}

}  // namespace

std::vector<std::string> conversationPrompts(AppDatabase& db, int limit) {
  if (limit <= 0) return {};
  return userTurns(db, limit);
}

int conversationPromptCount(AppDatabase& db) { return int(userTurns(db, -1).size()); }

}  // namespace moe
