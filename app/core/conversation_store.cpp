#include "app/core/conversation_store.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

namespace moe {

namespace {

constexpr const char* kConversationColumns =
    "c.id, c.title, c.system_prompt, c.sampling_json, c.model_path, c.created_at, c.updated_at, "
    "c.deleted_at, "
    "(SELECT count(*) FROM messages m WHERE m.conversation_id = c.id AND m.shown = 1)";

// Selected FROM messages m. The two counts are 0 for a reply never regenerated (turn_id NULL).
constexpr const char* kMessageColumns =
    "m.id, m.conversation_id, m.position, m.role, m.text, m.state, m.created_at, m.updated_at, "
    "m.prompt_tokens, m.completion_tokens, m.ttft_ms, m.prefill_tps, m.decode_tps, m.stop_reason, "
    "coalesce(m.turn_id, m.id), m.shown, "
    "(SELECT count(*) FROM messages a WHERE a.turn_id = m.turn_id AND a.id <= m.id), "
    "(SELECT count(*) FROM messages a WHERE a.turn_id = m.turn_id), "
    "m.model_name, m.model_sha256, m.sampling_json, m.answered_text";

Conversation readConversation(const sql::Statement& st) {
  Conversation c;
  c.id = st.columnInt64(0);
  c.title = st.columnText(1);
  c.system_prompt = st.columnText(2);
  c.sampling_json = st.columnText(3);
  c.model_path = st.columnText(4);
  c.created_at = st.columnInt64(5);
  c.updated_at = st.columnInt64(6);
  if (!st.isNull(7)) c.deleted_at = st.columnInt64(7);
  c.message_count = st.columnInt64(8);
  return c;
}

std::optional<int64_t> optInt(const sql::Statement& st, int col) {
  if (st.isNull(col)) return std::nullopt;
  return st.columnInt64(col);
}

std::optional<double> optDouble(const sql::Statement& st, int col) {
  if (st.isNull(col)) return std::nullopt;
  return st.columnDouble(col);
}

Message readMessage(const sql::Statement& st) {
  Message m;
  m.id = st.columnInt64(0);
  m.conversation_id = st.columnInt64(1);
  m.position = st.columnInt64(2);
  m.role = roleFromString(st.columnText(3));
  m.text = st.columnText(4);
  m.state = messageStateFromString(st.columnText(5));
  m.created_at = st.columnInt64(6);
  m.updated_at = st.columnInt64(7);
  m.stats.prompt_tokens = optInt(st, 8);
  m.stats.completion_tokens = optInt(st, 9);
  m.stats.ttft_ms = optDouble(st, 10);
  m.stats.prefill_tps = optDouble(st, 11);
  m.stats.decode_tps = optDouble(st, 12);
  m.stats.stop_reason = st.columnText(13);
  m.turn = st.columnInt64(14);
  m.shown = st.columnInt64(15) != 0;
  m.alternative = std::max(1, static_cast<int>(st.columnInt64(16)));
  m.alternatives = std::max(1, static_cast<int>(st.columnInt64(17)));
  m.origin = {st.columnText(18), st.columnText(19), st.columnText(20)};
  m.answered = st.columnText(21);
  return m;
}

void bindOpt(sql::Statement& st, int index, const std::optional<int64_t>& v) {
  if (v)
    st.bindInt64(index, *v);
  else
    st.bindNull(index);
}

void bindOpt(sql::Statement& st, int index, const std::optional<double>& v) {
  if (v)
    st.bindDouble(index, *v);
  else
    st.bindNull(index);
}

// Runs a one-row UPDATE ... RETURNING conversation_id; nullopt when no row matched.
std::optional<int64_t> returningConversation(sql::Statement& st) {
  if (!st.step()) return std::nullopt;
  int64_t conv = st.columnInt64(0);
  st.run();
  return conv;
}

}  // namespace

const char* toString(Role role) {
  switch (role) {
    case Role::System: return "system";
    case Role::User: return "user";
    case Role::Assistant: return "assistant";
  }
  return "user";
}

const char* toString(MessageState state) {
  switch (state) {
    case MessageState::Complete: return "complete";
    case MessageState::Streaming: return "streaming";
    case MessageState::Interrupted: return "interrupted";
    case MessageState::Stopped: return "stopped";
    case MessageState::Error: return "error";
  }
  return "error";
}

Role roleFromString(std::string_view s) {
  for (Role r : {Role::System, Role::User, Role::Assistant})
    if (s == toString(r)) return r;
  throw std::invalid_argument("unknown message role '" + std::string(s) + "'");
}

MessageState messageStateFromString(std::string_view s) {
  for (MessageState m : {MessageState::Complete, MessageState::Streaming, MessageState::Interrupted,
                         MessageState::Stopped, MessageState::Error})
    if (s == toString(m)) return m;
  throw std::invalid_argument("unknown message state '" + std::string(s) + "'");
}

ConversationStore::ConversationStore(AppDatabase& db, Clock clock) : db_(db.db()), clock_(std::move(clock)) {}

// ---- conversations ----

int64_t ConversationStore::createConversation(const std::string& title, const std::string& system_prompt,
                                              const std::string& sampling_json,
                                              const std::string& model_path) {
  auto st = db_.prepare(
      "INSERT INTO conversations (title, created_at, updated_at, system_prompt, sampling_json, model_path) "
      "VALUES (?1, ?2, ?2, ?3, ?4, ?5)");
  st.bindText(1, title).bindInt64(2, clock_()).bindText(3, system_prompt);
  st.bindText(4, sampling_json.empty() ? "{}" : sampling_json).bindText(5, model_path);
  st.run();
  return db_.lastInsertRowid();
}

std::vector<Conversation> ConversationStore::list() {
  auto st =
      db_.prepare(std::string("SELECT ") + kConversationColumns +
                  " FROM conversations c WHERE c.deleted_at IS NULL ORDER BY c.updated_at DESC, c.id DESC");
  std::vector<Conversation> out;
  while (st.step()) out.push_back(readConversation(st));
  return out;
}

std::vector<Conversation> ConversationStore::listDeleted() {
  auto st = db_.prepare(std::string("SELECT ") + kConversationColumns +
                        " FROM conversations c WHERE c.deleted_at IS NOT NULL "
                        "ORDER BY c.deleted_at DESC, c.id DESC");
  std::vector<Conversation> out;
  while (st.step()) out.push_back(readConversation(st));
  return out;
}

std::optional<Conversation> ConversationStore::get(int64_t id) {
  auto st =
      db_.prepare(std::string("SELECT ") + kConversationColumns + " FROM conversations c WHERE c.id = ?1");
  st.bindInt64(1, id);
  if (!st.step()) return std::nullopt;
  return readConversation(st);
}

namespace {

bool setColumn(sql::Database& db, const char* column, int64_t id, const std::string& value) {
  auto st = db.prepare(std::string("UPDATE conversations SET ") + column + " = ?2 WHERE id = ?1");
  st.bindInt64(1, id).bindText(2, value);
  st.run();
  return db.changes() > 0;
}

}  // namespace

bool ConversationStore::rename(int64_t id, const std::string& title) {
  return setColumn(db_, "title", id, title);
}
bool ConversationStore::setSystemPrompt(int64_t id, const std::string& p) {
  return setColumn(db_, "system_prompt", id, p);
}
bool ConversationStore::setSampling(int64_t id, const std::string& json) {
  return setColumn(db_, "sampling_json", id, json.empty() ? "{}" : json);
}
bool ConversationStore::setModelPath(int64_t id, const std::string& path) {
  return setColumn(db_, "model_path", id, path);
}

bool ConversationStore::softDelete(int64_t id) {
  auto st = db_.prepare("UPDATE conversations SET deleted_at = ?2 WHERE id = ?1 AND deleted_at IS NULL");
  st.bindInt64(1, id).bindInt64(2, clock_());
  st.run();
  return db_.changes() > 0;
}

bool ConversationStore::restore(int64_t id) {
  auto st =
      db_.prepare("UPDATE conversations SET deleted_at = NULL WHERE id = ?1 AND deleted_at IS NOT NULL");
  st.bindInt64(1, id);
  st.run();
  return db_.changes() > 0;
}

int64_t ConversationStore::purgeDeleted(std::optional<int64_t> deleted_up_to) {
  // ON DELETE CASCADE removes the messages; their trigger removes them from the index.
  sql::Transaction tx(db_);
  auto st = db_.prepare("DELETE FROM conversations WHERE deleted_at IS NOT NULL AND deleted_at <= ?1");
  st.bindInt64(1, deleted_up_to.value_or(std::numeric_limits<int64_t>::max()));
  st.run();
  int64_t n = db_.changes();
  tx.commit();
  return n;
}

// ---- messages ----

std::vector<Message> ConversationStore::messages(int64_t conversation_id) {
  return conversationMessages(conversation_id, /*shown_only=*/true);
}

std::vector<Message> ConversationStore::messagesWithAlternatives(int64_t conversation_id) {
  return conversationMessages(conversation_id, /*shown_only=*/false);
}

std::vector<Message> ConversationStore::conversationMessages(int64_t conversation_id, bool shown_only) {
  auto st =
      db_.prepare(std::string("SELECT ") + kMessageColumns + " FROM messages m WHERE m.conversation_id = ?1" +
                  (shown_only ? " AND m.shown = 1" : "") + " ORDER BY m.position");
  st.bindInt64(1, conversation_id);
  std::vector<Message> out;
  while (st.step()) out.push_back(readMessage(st));
  return out;
}

std::optional<Message> ConversationStore::message(int64_t message_id) {
  auto st = db_.prepare(std::string("SELECT ") + kMessageColumns + " FROM messages m WHERE m.id = ?1");
  st.bindInt64(1, message_id);
  if (!st.step()) return std::nullopt;
  return readMessage(st);
}

bool ConversationStore::touchConversation(int64_t conversation_id, int64_t now) {
  auto st = db_.prepare("UPDATE conversations SET updated_at = ?2 WHERE id = ?1");
  st.bindInt64(1, conversation_id).bindInt64(2, now);
  st.run();
  return db_.changes() > 0;
}

int64_t ConversationStore::duplicate(int64_t id) {
  const int64_t now = clock_();
  sql::Transaction tx(db_);
  auto conv = db_.prepare(
      "INSERT INTO conversations (title, system_prompt, sampling_json, model_path, created_at, updated_at) "
      "SELECT title || ' (copy)', system_prompt, sampling_json, model_path, ?2, ?2 FROM conversations "
      "WHERE id = ?1 AND deleted_at IS NULL");
  conv.bindInt64(1, id).bindInt64(2, now);
  conv.run();
  if (db_.changes() == 0) return 0;
  const int64_t copy = db_.lastInsertRowid();
  auto msgs = db_.prepare(
      "INSERT INTO messages (conversation_id, position, role, text, state, created_at, updated_at, "
      "prompt_tokens, completion_tokens, ttft_ms, prefill_tps, decode_tps, stop_reason, model_name, "
      "model_sha256, sampling_json, answered_text) "
      "SELECT ?2, row_number() OVER (ORDER BY position) - 1, role, text, state, ?3, ?3, prompt_tokens, "
      "completion_tokens, ttft_ms, prefill_tps, decode_tps, stop_reason, model_name, model_sha256, "
      "sampling_json, answered_text FROM messages "
      "WHERE conversation_id = ?1 AND shown = 1 AND state != 'streaming' ORDER BY position");
  msgs.bindInt64(1, id).bindInt64(2, copy).bindInt64(3, now);
  msgs.run();
  tx.commit();
  return copy;
}

int64_t ConversationStore::appendMessage(int64_t conversation_id, Role role, const std::string& text,
                                         MessageState state, const ReplyOrigin& origin) {
  const int64_t now = clock_();
  sql::Transaction tx(db_);
  if (!touchConversation(conversation_id, now))
    throw std::invalid_argument("no conversation with id " + std::to_string(conversation_id));
  auto st = db_.prepare(
      "INSERT INTO messages (conversation_id, position, role, text, state, created_at, updated_at, "
      "model_name, "
      "model_sha256, sampling_json) "
      "VALUES (?1, (SELECT coalesce(max(position), -1) + 1 FROM messages WHERE conversation_id = ?1), "
      "?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8)");
  st.bindInt64(1, conversation_id).bindText(2, toString(role)).bindText(3, text);
  st.bindText(4, toString(state)).bindInt64(5, now);
  st.bindText(6, origin.model_name).bindText(7, origin.model_sha256).bindText(8, origin.sampling_json);
  st.run();
  const int64_t id = db_.lastInsertRowid();
  tx.commit();
  return id;
}

int64_t ConversationStore::addMessage(int64_t conversation_id, Role role, const std::string& text) {
  return appendMessage(conversation_id, role, text, MessageState::Complete);
}

int64_t ConversationStore::beginReply(int64_t conversation_id, const ReplyOrigin& origin) {
  return appendMessage(conversation_id, Role::Assistant, {}, MessageState::Streaming, origin);
}

int64_t ConversationStore::beginAlternative(int64_t reply_id, const ReplyOrigin& origin) {
  const int64_t now = clock_();
  sql::Transaction tx(db_);
  auto find = db_.prepare("SELECT conversation_id, coalesce(turn_id, id), role FROM messages WHERE id = ?1");
  find.bindInt64(1, reply_id);
  if (!find.step() || find.columnText(2) != toString(Role::Assistant))
    throw std::invalid_argument("message " + std::to_string(reply_id) + " is not an assistant reply");
  const int64_t conversation = find.columnInt64(0), turn = find.columnInt64(1);
  // The new reply goes at the end: only the last turn may get one, or it
  // would land after messages that came later.
  auto later = db_.prepare(
      "SELECT count(*) FROM messages WHERE conversation_id = ?1 AND coalesce(turn_id, id) != ?2 AND position "
      "> "
      "(SELECT position FROM messages WHERE id = ?2)");
  later.bindInt64(1, conversation).bindInt64(2, turn);
  later.step();
  if (later.columnInt64(0) > 0)
    throw std::invalid_argument("message " + std::to_string(reply_id) +
                                " is not in the conversation's last turn");
  auto group = db_.prepare("UPDATE messages SET turn_id = id WHERE id = ?1 AND turn_id IS NULL");
  group.bindInt64(1, turn);
  group.run();
  auto st = db_.prepare(
      "INSERT INTO messages (conversation_id, position, role, text, state, created_at, updated_at, turn_id, "
      "shown, model_name, model_sha256, sampling_json) VALUES (?1, (SELECT max(position) + 1 FROM messages "
      "WHERE conversation_id = ?1), 'assistant', '', 'streaming', ?2, ?2, ?3, 0, ?4, ?5, ?6)");
  st.bindInt64(1, conversation).bindInt64(2, now).bindInt64(3, turn);
  st.bindText(4, origin.model_name).bindText(5, origin.model_sha256).bindText(6, origin.sampling_json);
  st.run();
  const int64_t id = db_.lastInsertRowid();
  tx.commit();
  return id;
}

std::vector<Message> ConversationStore::alternatives(int64_t message_id) {
  auto st = db_.prepare(std::string("SELECT ") + kMessageColumns +
                        " FROM messages m WHERE coalesce(m.turn_id, m.id) = "
                        "(SELECT coalesce(turn_id, id) FROM messages WHERE id = ?1) ORDER BY m.id");
  st.bindInt64(1, message_id);
  std::vector<Message> out;
  while (st.step()) out.push_back(readMessage(st));
  return out;
}

void ConversationStore::showInTurn(int64_t message_id) {
  auto st = db_.prepare(
      "UPDATE messages SET shown = (id = ?1) WHERE turn_id = (SELECT turn_id FROM messages WHERE id = ?1)");
  st.bindInt64(1, message_id);
  st.run();
}

bool ConversationStore::showAlternative(int64_t message_id) {
  sql::Transaction tx(db_);
  if (!message(message_id)) return false;
  showInTurn(message_id);
  tx.commit();
  return true;
}

bool ConversationStore::checkpointReply(int64_t message_id, const std::string& text) {
  // Autocommit: one statement is one transaction. The conversation is not
  // touched here; finishReply does that once.
  auto st =
      db_.prepare("UPDATE messages SET text = ?2, updated_at = ?3 WHERE id = ?1 AND state = 'streaming'");
  st.bindInt64(1, message_id).bindText(2, text).bindInt64(3, clock_());
  st.run();
  return db_.changes() > 0;
}

bool ConversationStore::finishReply(int64_t message_id, const std::string& text, MessageState state,
                                    const ReplyStats& stats) {
  if (state == MessageState::Streaming)
    throw std::invalid_argument("finishReply: a finished reply cannot be streaming");
  const int64_t now = clock_();
  sql::Transaction tx(db_);
  auto st = db_.prepare(
      "UPDATE messages SET text = ?2, state = ?3, updated_at = ?4, prompt_tokens = ?5, completion_tokens = "
      "?6, "
      "ttft_ms = ?7, prefill_tps = ?8, decode_tps = ?9, stop_reason = ?10 WHERE id = ?1 "
      "RETURNING conversation_id");
  st.bindInt64(1, message_id).bindText(2, text).bindText(3, toString(state)).bindInt64(4, now);
  bindOpt(st, 5, stats.prompt_tokens);
  bindOpt(st, 6, stats.completion_tokens);
  bindOpt(st, 7, stats.ttft_ms);
  bindOpt(st, 8, stats.prefill_tps);
  bindOpt(st, 9, stats.decode_tps);
  if (stats.stop_reason.empty())
    st.bindNull(10);
  else
    st.bindText(10, stats.stop_reason);
  auto conv = returningConversation(st);
  if (!conv) return false;
  if (state == MessageState::Complete || (state == MessageState::Stopped && !text.empty()))
    showInTurn(message_id);
  touchConversation(*conv, now);
  tx.commit();
  return true;
}

int64_t ConversationStore::recoverInterrupted() {
  auto st = db_.prepare(
      "UPDATE messages SET state = 'interrupted', stop_reason = coalesce(stop_reason, 'interrupted') "
      "WHERE state = 'streaming'");
  st.run();
  return db_.changes();
}

std::vector<std::string> ConversationStore::streamingChatTitles() {
  auto st = db_.prepare(
      "SELECT c.title FROM conversations c WHERE EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = "
      "c.id "
      "AND m.state = 'streaming') ORDER BY c.updated_at DESC, c.id DESC");
  std::vector<std::string> titles;
  while (st.step()) titles.push_back(st.columnText(0));
  return titles;
}

bool ConversationStore::updateMessageText(int64_t message_id, const std::string& text) {
  const int64_t now = clock_();
  sql::Transaction tx(db_);
  auto st =
      db_.prepare("UPDATE messages SET text = ?2, updated_at = ?3 WHERE id = ?1 RETURNING conversation_id");
  st.bindInt64(1, message_id).bindText(2, text).bindInt64(3, now);
  auto conv = returningConversation(st);
  if (!conv) return false;
  touchConversation(*conv, now);
  tx.commit();
  return true;
}

int64_t ConversationStore::editForResend(int64_t conversation_id, int64_t message_id,
                                         const std::string& text) {
  const int64_t now = clock_();
  sql::Transaction tx(db_);
  auto find = db_.prepare(
      "SELECT position, text FROM messages WHERE id = ?1 AND conversation_id = ?2 AND role = 'user'");
  find.bindInt64(1, message_id).bindInt64(2, conversation_id);
  if (!find.step())
    throw std::invalid_argument("message " + std::to_string(message_id) +
                                " is no user message of conversation " + std::to_string(conversation_id));
  const int64_t position = find.columnInt64(0);
  const std::string old_text = find.columnText(1);
  // The turn that answers it: the assistant message right after it, if any.
  auto next = db_.prepare(
      "SELECT coalesce(turn_id, id), role FROM messages WHERE conversation_id = ?1 AND position > ?2 "
      "ORDER BY position LIMIT 1");
  next.bindInt64(1, conversation_id).bindInt64(2, position);
  const int64_t turn =
      next.step() && next.columnText(1) == toString(Role::Assistant) ? next.columnInt64(0) : 0;
  auto del = db_.prepare(
      "DELETE FROM messages WHERE conversation_id = ?1 AND position > ?2 AND coalesce(turn_id, id) != ?3");
  del.bindInt64(1, conversation_id).bindInt64(2, position).bindInt64(3, turn);
  del.run();
  int64_t shown = 0;
  if (turn) {
    if (old_text != text) {
      auto keep = db_.prepare(
          "UPDATE messages SET answered_text = ?2 WHERE coalesce(turn_id, id) = ?1 AND answered_text = ''");
      keep.bindInt64(1, turn).bindText(2, old_text);
      keep.run();
    }
    auto pick =
        db_.prepare("SELECT id FROM messages WHERE coalesce(turn_id, id) = ?1 ORDER BY shown DESC, id DESC");
    pick.bindInt64(1, turn);
    if (pick.step()) shown = pick.columnInt64(0);
  }
  auto set = db_.prepare("UPDATE messages SET text = ?2, updated_at = ?3 WHERE id = ?1");
  set.bindInt64(1, message_id).bindText(2, text).bindInt64(3, now);
  set.run();
  touchConversation(conversation_id, now);
  tx.commit();
  return shown;
}

int64_t ConversationStore::truncateAfter(int64_t conversation_id, int64_t message_id) {
  const int64_t now = clock_();
  sql::Transaction tx(db_);
  auto find = db_.prepare("SELECT position FROM messages WHERE id = ?1 AND conversation_id = ?2");
  find.bindInt64(1, message_id).bindInt64(2, conversation_id);
  if (!find.step())
    throw std::invalid_argument("message " + std::to_string(message_id) + " is not in conversation " +
                                std::to_string(conversation_id));
  const int64_t position = find.columnInt64(0);
  auto del = db_.prepare("DELETE FROM messages WHERE conversation_id = ?1 AND position > ?2");
  del.bindInt64(1, conversation_id).bindInt64(2, position);
  del.run();
  const int64_t n = db_.changes();
  touchConversation(conversation_id, now);
  tx.commit();
  return n;
}

}  // namespace moe
