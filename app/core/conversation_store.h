// Conversations and their messages in the app database, written so that a
// chat survives exit, crash or kill: a user message is committed the moment it
// is sent, a streaming reply is checkpointed several times a second, and at the
// next open recoverInterrupted() marks a reply a crash cut off as 'interrupted',
// keeping its checkpointed text. A regenerated reply is kept beside the earlier
// ones as an alternative of the same assistant turn. UTF-8 std::string text, int64 ids, Unix ms
// times. Qt-free. See docs/STORAGE.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/core/app_database.h"

namespace moe {

enum class Role { System, User, Assistant };
enum class MessageState { Complete, Streaming, Interrupted, Stopped, Error };

// The spellings stored in the database ("user", "streaming", ...).
const char* toString(Role role);
const char* toString(MessageState state);
// Throw std::invalid_argument for an unknown spelling.
Role roleFromString(std::string_view s);
MessageState messageStateFromString(std::string_view s);

// Generation figures of a reply; unset ones are stored as NULL.
struct ReplyStats {
  std::optional<int64_t> prompt_tokens, completion_tokens;
  std::optional<double> ttft_ms, prefill_tps, decode_tps;
  std::string stop_reason;  // e.g. "eos", "stop-string", "max-tokens", "user"
};

// What wrote a reply: the model file (name and SHA-256) and the sampling, as JSON
// with the seed drawn for it. Empty for user messages and replies stored before v5.
struct ReplyOrigin {
  std::string model_name, model_sha256, sampling_json;
  bool empty() const { return model_name.empty() && model_sha256.empty() && sampling_json.empty(); }
};

struct Conversation {
  int64_t id = 0;
  std::string title, system_prompt, sampling_json, model_path;
  int64_t created_at = 0, updated_at = 0;
  std::optional<int64_t> deleted_at;  // set while soft-deleted
  int64_t message_count = 0;
};

struct Message {
  int64_t id = 0, conversation_id = 0, position = 0;
  Role role = Role::User;
  std::string text;
  MessageState state = MessageState::Complete;
  int64_t created_at = 0, updated_at = 0;
  ReplyStats stats;
  // The assistant turn this reply belongs to: the id of the turn's first reply
  // (its own id for a reply never regenerated, and for other roles).
  int64_t turn = 0;
  bool shown = true;     // the turn's reply the chat shows and prompts use
  int alternative = 1;   // 1-based place among the turn's replies, oldest first
  int alternatives = 1;  // how many replies the turn has
  ReplyOrigin origin;    // assistant replies: what wrote it
  // An earlier reply kept by edit-and-resend: the text of the user message it
  // answered, before the edit. Empty: it answers the message as it reads now.
  std::string answered;
};

struct SearchHit {
  int64_t conversation_id = 0, message_id = 0;
  std::string conversation_title;
  // An excerpt of the message with each match between kMatchBegin and kMatchEnd
  // (control characters that never occur in chat text, so a UI can escape the
  // rest and highlight between them).
  std::string snippet;
};
inline constexpr char kMatchBegin = '\x02';
inline constexpr char kMatchEnd = '\x03';

class ConversationStore {
 public:
  using Clock = std::function<int64_t()>;
  // clock: the source of every *_at value (tests pass a counter).
  explicit ConversationStore(AppDatabase& db, Clock clock = unixMillisNow);

  // ---- conversations ----
  int64_t createConversation(const std::string& title, const std::string& system_prompt = {},
                             const std::string& sampling_json = "{}", const std::string& model_path = {});
  // Live (not deleted) conversations, most recently updated first.
  std::vector<Conversation> list();
  // Soft-deleted ones, most recently deleted first (a trash view).
  std::vector<Conversation> listDeleted();
  std::optional<Conversation> get(int64_t id);
  // These edit settings and do not move the conversation in the list; each
  // returns false when there is no such conversation.
  bool rename(int64_t id, const std::string& title);
  // A new live conversation "<title> (copy)" with the same settings and the messages the
  // chat shows (text, state and figures; not the other replies of a regenerated turn,
  // nor a reply still streaming), in one transaction. 0 when `id` is no live conversation.
  int64_t duplicate(int64_t id);
  bool setSystemPrompt(int64_t id, const std::string& system_prompt);
  bool setSampling(int64_t id, const std::string& sampling_json);
  bool setModelPath(int64_t id, const std::string& model_path);
  // Hides it from list() and search(); restore() undoes that.
  bool softDelete(int64_t id);
  bool restore(int64_t id);
  // Deletes for good the conversations soft-deleted at or before the given
  // time (default: all of them), with their messages. Returns how many.
  int64_t purgeDeleted(std::optional<int64_t> deleted_up_to = std::nullopt);

  // ---- messages ----
  // In conversation order; of each assistant turn only the shown reply.
  std::vector<Message> messages(int64_t conversation_id);
  // In conversation order with every reply of each turn (shown or not), as an
  // export carries them.
  std::vector<Message> messagesWithAlternatives(int64_t conversation_id);
  std::optional<Message> message(int64_t message_id);
  // Appends a complete message and commits it (with the conversation's
  // updated_at) before returning. Throws std::invalid_argument for an unknown
  // conversation.
  int64_t addMessage(int64_t conversation_id, Role role, const std::string& text);
  // Appends an empty assistant message in state 'streaming'.
  int64_t beginReply(int64_t conversation_id, const ReplyOrigin& origin = {});
  // Another reply to the assistant turn of reply_id (which must be the
  // conversation's last turn): an empty 'streaming' message that stays hidden,
  // the turn showing what it showed, until finishReply completes it (or stops
  // it with some text). The earlier replies are kept. Throws
  // std::invalid_argument for a message that is not such a reply.
  int64_t beginAlternative(int64_t reply_id, const ReplyOrigin& origin = {});
  // Every reply of the turn message_id belongs to, oldest first; empty for an
  // unknown message.
  std::vector<Message> alternatives(int64_t message_id);
  // Makes message_id the shown reply of its turn. False for an unknown message.
  bool showAlternative(int64_t message_id);
  // Saves the text streamed so far: one cheap UPDATE, meant to be called a few
  // times a second. Returns false unless the message is still streaming.
  bool checkpointReply(int64_t message_id, const std::string& text);
  // The final text, state (not Streaming) and figures, together with the
  // conversation's updated_at, in one transaction. A reply that completes, or
  // is stopped with some text, becomes the shown one of its turn in the same
  // transaction. Returns false for an unknown message.
  bool finishReply(int64_t message_id, const std::string& text, MessageState state,
                   const ReplyStats& stats = {});
  // Run at open: replies left 'streaming' by a crash or kill become
  // 'interrupted' with the text of their last checkpoint. Returns how many.
  int64_t recoverInterrupted();
  // The titles of the chats with a reply left 'streaming' (what recoverInterrupted
  // would recover), the latest first.
  std::vector<std::string> streamingChatTitles();
  // For edit-and-resend: replaces the text (the state is kept).
  bool updateMessageText(int64_t message_id, const std::string& text);
  // For edit-and-resend, in one transaction: user message message_id gets `text`;
  // the replies to it (its assistant turn) stay, as the turn's earlier replies, each
  // remembering the text it answered (Message::answered); every later message is
  // deleted. Returns the turn's shown reply, to begin the new reply as its
  // alternative (beginAlternative), or 0 when the message had no reply. Throws
  // std::invalid_argument when message_id is no user message of the conversation.
  int64_t editForResend(int64_t conversation_id, int64_t message_id, const std::string& text);
  // For regenerate / edit-and-resend: deletes every message after message_id
  // in its conversation. Returns how many were deleted; throws
  // std::invalid_argument when message_id is not in that conversation.
  int64_t truncateAfter(int64_t conversation_id, int64_t message_id);

  // ---- search ----
  // Full-text search over live conversations, best match first. The query is
  // the user's words, never FTS syntax: every word is quoted (so `"`, AND,
  // NEAR(, * are just text) and the last one matches as a prefix, so results
  // come while typing. An empty query gives no hits.
  std::vector<SearchHit> search(const std::string& user_query, int limit = 50);

 private:
  bool touchConversation(int64_t conversation_id, int64_t now);
  std::vector<Message> conversationMessages(int64_t conversation_id, bool shown_only);
  int64_t appendMessage(int64_t conversation_id, Role role, const std::string& text, MessageState state,
                        const ReplyOrigin& origin = {});
  void showInTurn(int64_t message_id);

  sql::Database& db_;
  Clock clock_;
};

// The FTS5 MATCH expression search() uses for a user's query ("" when it has no words).
std::string ftsQueryFromUserText(const std::string& user_query);

}  // namespace moe
