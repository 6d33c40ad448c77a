// The stores over a real SQLite file: conversations and messages (CRUD,
// order, soft delete and undo, purge, streaming replies and their recovery,
// full-text search with hostile queries), alternatives of a regenerated reply,
// export to Markdown and JSON and the file name it suggests, downloads and
// installed models.
#include <QtTest>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>

#include "app/core/app_database.h"
#include "app/core/chat_export.h"
#include "app/core/conversation_store.h"
#include "app/core/database_startup.h"
#include "app/core/download_store.h"
#include "app/core/model_registry.h"

using moe::AppDatabase;
using moe::ConversationStore;
using moe::MessageState;
using moe::Role;

namespace {

std::string sha(char c) { return std::string(64, c); }

// A clock that ticks 1 ms per reading, so every order in the tests is decided by
// the sequence of calls, not by how fast the machine is.
ConversationStore::Clock tickingClock(int64_t start = 1700000000000) {
  auto t = std::make_shared<int64_t>(start);
  return [t] { return (*t)++; };
}

std::vector<int64_t> ids(const std::vector<moe::Conversation>& list) {
  std::vector<int64_t> out;
  for (const auto& c : list) out.push_back(c.id);
  return out;
}

std::vector<int64_t> hitMessages(const std::vector<moe::SearchHit>& hits) {
  std::vector<int64_t> out;
  for (const auto& h : hits) out.push_back(h.message_id);
  return out;
}

// The FTS index agrees with the messages table ('integrity-check' throws otherwise).
void checkFtsConsistent(AppDatabase& adb) {
  adb.db().exec("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)");
}

}  // namespace

class PersistStoreTest : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;
  std::string dbPath(const char* name) { return dir_.filePath(name).toStdString(); }

 private slots:
  void conversationsCrudAndOrder() {
    AppDatabase adb = AppDatabase::open(dbPath("crud.db"));
    ConversationStore store(adb, tickingClock());
    const int64_t a =
        store.createConversation("Alpha", "You are terse.", R"({"temperature":0.2})", "/m/a.gguf");
    const int64_t b = store.createConversation("Beta");
    const int64_t c = store.createConversation("Gamma");
    // Newest first while nothing has been said.
    QCOMPARE(ids(store.list()), (std::vector<int64_t>{c, b, a}));

    auto got = store.get(a);
    QVERIFY(got.has_value());
    QCOMPARE(got->title, std::string("Alpha"));
    QCOMPARE(got->system_prompt, std::string("You are terse."));
    QCOMPARE(got->sampling_json, std::string(R"({"temperature":0.2})"));
    QCOMPARE(got->model_path, std::string("/m/a.gguf"));
    QCOMPARE(got->created_at, got->updated_at);
    QVERIFY(!got->deleted_at.has_value());
    QCOMPARE(store.get(b)->sampling_json, std::string("{}"));

    // A message moves its conversation to the top and counts.
    store.addMessage(a, Role::User, "hello");
    auto list = store.list();
    QCOMPARE(ids(list), (std::vector<int64_t>{a, c, b}));
    QCOMPARE(list[0].message_count, int64_t(1));
    QVERIFY(list[0].updated_at > list[1].updated_at);
    QCOMPARE(list[1].message_count, int64_t(0));

    // Settings change in place and do not reorder.
    QVERIFY(store.rename(b, "Beta renamed"));
    QVERIFY(store.setSystemPrompt(b, "Be kind."));
    QVERIFY(store.setSampling(b, R"({"top_p":0.9})"));
    QVERIFY(store.setModelPath(b, "/m/b.gguf"));
    QCOMPARE(ids(store.list()), (std::vector<int64_t>{a, c, b}));
    got = store.get(b);
    QCOMPARE(got->title, std::string("Beta renamed"));
    QCOMPARE(got->system_prompt, std::string("Be kind."));
    QCOMPARE(got->sampling_json, std::string(R"({"top_p":0.9})"));
    QCOMPARE(got->model_path, std::string("/m/b.gguf"));
    QVERIFY(!store.rename(9999, "nobody"));
    QVERIFY(!store.get(9999).has_value());
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.addMessage(9999, Role::User, "lost"));
  }

  void messagesInOrderWithStats() {
    AppDatabase adb = AppDatabase::open(dbPath("messages.db"));
    ConversationStore store(adb, tickingClock());
    const int64_t conv = store.createConversation("chat");
    const int64_t sys = store.addMessage(conv, Role::System, "rules");
    const int64_t user = store.addMessage(conv, Role::User, "question");
    const int64_t reply = store.beginReply(conv);
    QVERIFY(store.checkpointReply(reply, "partial"));
    moe::ReplyStats stats;
    stats.prompt_tokens = 17;
    stats.completion_tokens = 42;
    stats.ttft_ms = 123.5;
    stats.prefill_tps = 456.25;
    stats.decode_tps = 7.75;
    stats.stop_reason = "eos";
    const int64_t before = store.get(conv)->updated_at;
    QVERIFY(store.finishReply(reply, "partial and whole", MessageState::Complete, stats));
    QVERIFY(store.get(conv)->updated_at > before);  // bumped in the same transaction
    // Once finished it is no longer checkpointable (a late timer cannot clobber it).
    QVERIFY(!store.checkpointReply(reply, "late"));
    QVERIFY(!store.finishReply(9999, "x", MessageState::Complete));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.finishReply(reply, "x", MessageState::Streaming));

    auto msgs = store.messages(conv);
    QCOMPARE(msgs.size(), size_t(3));
    QCOMPARE(msgs[0].id, sys);
    QCOMPARE(msgs[0].role, Role::System);
    QCOMPARE(msgs[1].id, user);
    QCOMPARE(msgs[1].text, std::string("question"));
    QCOMPARE(msgs[1].state, MessageState::Complete);
    QVERIFY(!msgs[1].stats.completion_tokens.has_value());
    QCOMPARE(msgs[2].id, reply);
    QCOMPARE(msgs[2].role, Role::Assistant);
    QCOMPARE(msgs[2].text, std::string("partial and whole"));
    QCOMPARE(msgs[2].state, MessageState::Complete);
    QCOMPARE(msgs[2].stats.prompt_tokens.value(), int64_t(17));
    QCOMPARE(msgs[2].stats.completion_tokens.value(), int64_t(42));
    QCOMPARE(msgs[2].stats.ttft_ms.value(), 123.5);
    QCOMPARE(msgs[2].stats.prefill_tps.value(), 456.25);
    QCOMPARE(msgs[2].stats.decode_tps.value(), 7.75);
    QCOMPARE(msgs[2].stats.stop_reason, std::string("eos"));
    for (size_t i = 0; i < msgs.size(); ++i) QCOMPARE(msgs[i].position, int64_t(i));

    // Edit-and-resend: change the question, drop what followed, answer again.
    QVERIFY(store.updateMessageText(user, "better question"));
    QCOMPARE(store.truncateAfter(conv, user), int64_t(1));
    const int64_t reply2 = store.beginReply(conv);
    QVERIFY(store.finishReply(reply2, "stopped early", MessageState::Stopped));
    msgs = store.messages(conv);
    QCOMPARE(msgs.size(), size_t(3));
    QCOMPARE(msgs[1].text, std::string("better question"));
    QCOMPARE(msgs[2].id, reply2);
    QCOMPARE(msgs[2].position, int64_t(2));
    QCOMPARE(msgs[2].state, MessageState::Stopped);
    QVERIFY(!store.message(reply).has_value());
    QCOMPARE(store.truncateAfter(conv, reply2), int64_t(0));
    const int64_t other = store.createConversation("other");
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.truncateAfter(other, user));
    QCOMPARE(store.messages(conv).size(), size_t(3));
    checkFtsConsistent(adb);
  }

  void softDeleteUndoAndPurge() {
    AppDatabase adb = AppDatabase::open(dbPath("delete.db"));
    ConversationStore store(adb, tickingClock());
    const int64_t keep = store.createConversation("keep");
    const int64_t gone = store.createConversation("gone");
    const int64_t later = store.createConversation("later");
    store.addMessage(keep, Role::User, "apples in the keep");
    store.addMessage(gone, Role::User, "apples in the gone one");
    store.addMessage(later, Role::User, "apples later");
    QCOMPARE(store.search("apples").size(), size_t(3));

    QVERIFY(store.softDelete(gone));
    QVERIFY(!store.softDelete(gone));  // already deleted
    QCOMPARE(ids(store.list()), (std::vector<int64_t>{later, keep}));
    QCOMPARE(ids(store.listDeleted()), (std::vector<int64_t>{gone}));
    QVERIFY(store.get(gone)->deleted_at.has_value());
    QCOMPARE(store.search("apples").size(), size_t(2));  // hidden from search
    QCOMPARE(store.messages(gone).size(), size_t(1));    // but still there for undo

    QVERIFY(store.restore(gone));  // undo
    QVERIFY(!store.restore(gone));
    QCOMPARE(ids(store.list()), (std::vector<int64_t>{later, gone, keep}));
    QCOMPARE(store.search("apples").size(), size_t(3));

    QVERIFY(store.softDelete(gone));
    const int64_t gone_at = *store.get(gone)->deleted_at;
    QVERIFY(store.softDelete(later));
    // Purge up to a time: only what was deleted by then goes.
    QCOMPARE(store.purgeDeleted(gone_at), int64_t(1));
    QVERIFY(!store.get(gone).has_value());
    QVERIFY(store.messages(gone).empty());  // cascaded
    QVERIFY(store.get(later).has_value());
    QCOMPARE(store.purgeDeleted(), int64_t(1));
    QVERIFY(store.listDeleted().empty());
    QCOMPARE(ids(store.list()), (std::vector<int64_t>{keep}));
    QCOMPARE(adb.db().queryInt64("SELECT count(*) FROM messages"), int64_t(1));
    checkFtsConsistent(adb);
    QCOMPARE(store.search("apples").size(), size_t(1));
  }

  void recoverInterruptedKeepsCheckpoint() {
    const std::string path = dbPath("recover.db");
    int64_t conv = 0, reply = 0, done = 0;
    {
      AppDatabase adb = AppDatabase::open(path);
      ConversationStore store(adb);
      conv = store.createConversation("crashy");
      store.addMessage(conv, Role::User, "tell me a story");
      done = store.beginReply(conv);
      store.finishReply(done, "a finished one", MessageState::Complete);
      store.addMessage(conv, Role::User, "another");
      reply = store.beginReply(conv);
      QVERIFY(store.checkpointReply(reply, "Once upon"));
      QVERIFY(store.checkpointReply(reply, "Once upon a time"));
      // The app "dies" here: no finishReply.
    }
    AppDatabase adb = AppDatabase::open(path);
    ConversationStore store(adb);
    QCOMPARE(store.message(reply)->state, MessageState::Streaming);
    QCOMPARE(store.streamingChatTitles(), std::vector<std::string>{"crashy"});
    QCOMPARE(store.recoverInterrupted(), int64_t(1));
    QCOMPARE(store.recoverInterrupted(), int64_t(0));
    QVERIFY(store.streamingChatTitles().empty());
    auto m = store.message(reply);
    QCOMPARE(m->state, MessageState::Interrupted);
    QCOMPARE(m->text, std::string("Once upon a time"));
    QCOMPARE(m->stats.stop_reason, std::string("interrupted"));
    QCOMPARE(store.message(done)->state, MessageState::Complete);
    QCOMPARE(store.messages(conv).size(), size_t(4));
  }

  void twoConnectionsShareTheFile() {
    // What two threads (each with its own AppDatabase) see of each other.
    const std::string path = dbPath("shared.db");
    AppDatabase a = AppDatabase::open(path);
    AppDatabase b = AppDatabase::open(path);
    ConversationStore sa(a), sb(b);
    const int64_t conv = sa.createConversation("from a");
    const int64_t reply = sa.beginReply(conv);
    sa.checkpointReply(reply, "seen by b");
    QCOMPARE(ids(sb.list()), (std::vector<int64_t>{conv}));
    QCOMPARE(sb.message(reply)->text, std::string("seen by b"));
    QVERIFY(sb.softDelete(conv));
    QVERIFY(sa.list().empty());
    // While one connection holds the write lock, the other still reads the last
    // commit, and its own write fails cleanly (SQLITE_BUSY) once its busy timeout runs out.
    {
      moe::sql::Transaction tx(a.db());
      a.db().exec("UPDATE conversations SET title = 'renamed in a'");
      QCOMPARE(sb.get(conv)->title, std::string("from a"));
      b.db().setBusyTimeout(50);
      try {
        sb.rename(conv, "renamed in b");
        QFAIL("a second writer got in");
      } catch (const moe::sql::SqliteError& e) {
        QCOMPARE(e.primaryCode(), 5);  // SQLITE_BUSY
      }
      tx.commit();
    }
    QCOMPARE(sb.get(conv)->title, std::string("renamed in a"));
  }

  void searchFindsWordsPrefixesAndUnicode() {
    AppDatabase adb = AppDatabase::open(dbPath("search.db"));
    ConversationStore store(adb, tickingClock());
    const int64_t conv = store.createConversation("Recipes");
    const int64_t m1 = store.addMessage(conv, Role::User, "How do I bake sourdough bread at home?");
    const int64_t m2 =
        store.addMessage(conv, Role::Assistant, "Use a caf\xC3\xA9-style oven and this AND that.");
    const int64_t m3 = store.addMessage(conv, Role::User,
                                        "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE "
                                        "\xF0\x9F\x8D\x9E NEAR(x) say \"hi\"");
    QCOMPARE(hitMessages(store.search("sourdough")), (std::vector<int64_t>{m1}));
    QCOMPARE(hitMessages(store.search("SOURDOUGH bread")), (std::vector<int64_t>{m1}));
    QCOMPARE(hitMessages(store.search("bre")), (std::vector<int64_t>{m1}));  // last word is a prefix
    QVERIFY(store.search("bre home").empty());                               // only the last word is a prefix
    QCOMPARE(hitMessages(store.search("cafe")), (std::vector<int64_t>{m2}));  // diacritics folded
    QCOMPARE(hitMessages(store.search("\xE6\x97\xA5\xE6\x9C\xAC")), (std::vector<int64_t>{m3}));
    QCOMPARE(hitMessages(store.search("AND")), (std::vector<int64_t>{m2}));  // the word, not the operator
    QCOMPARE(hitMessages(store.search("NEAR(")), (std::vector<int64_t>{m3}));
    QCOMPARE(hitMessages(store.search("say \"hi")), (std::vector<int64_t>{m3}));
    QVERIFY(store.search("sourdough cafe").empty());  // all words must match

    auto hits = store.search("bread");
    QCOMPARE(hits.size(), size_t(1));
    QCOMPARE(hits[0].conversation_id, conv);
    QCOMPARE(hits[0].conversation_title, std::string("Recipes"));
    const std::string marked = std::string(1, moe::kMatchBegin) + "bread" + std::string(1, moe::kMatchEnd);
    QVERIFY2(hits[0].snippet.find(marked) != std::string::npos, hits[0].snippet.c_str());

    // Nothing a user types is an SQL or FTS syntax error.
    const std::vector<std::string> hostile = {"\"",
                                              "\"\"",
                                              "\"unbalanced",
                                              "AND",
                                              "OR",
                                              "NOT",
                                              "a AND",
                                              "AND b",
                                              "*",
                                              "**",
                                              "a*b",
                                              "NEAR(",
                                              "NEAR(a b",
                                              "NEAR(a b, 3)",
                                              "(",
                                              ")",
                                              "{",
                                              "}",
                                              "text:",
                                              "text:bread",
                                              ":",
                                              "^",
                                              "-bread",
                                              "+",
                                              "'",
                                              "'; DROP TABLE messages; --",
                                              "\\",
                                              "bread\"",
                                              "\xFF\xFE",
                                              std::string("nul\0byte", 8),
                                              "\t\n",
                                              "   ",
                                              "",
                                              "\xE2\x80\x8B",
                                              std::string(5000, 'x'),
                                              std::string(300, '"')};
    for (const std::string& q : hostile) {
      try {
        store.search(q);
      } catch (const std::exception& e) {
        QFAIL(qPrintable(QString("query %1 threw: %2").arg(QString::fromStdString(q).left(40), e.what())));
      }
    }
    QVERIFY(store.search("").empty());
    QVERIFY(store.search("   ").empty());
    QCOMPARE(adb.db().queryInt64("SELECT count(*) FROM messages"), int64_t(3));
    QCOMPARE(store.search("bread", 0).size(), size_t(0));
  }

  // Regenerate keeps every reply: the new one is hidden until it completes (or
  // stops with text), the earlier one stays shown and in the prompts meanwhile.
  void regeneratedRepliesAreAlternativesOfTheTurn() {
    AppDatabase adb = AppDatabase::open(dbPath("alternatives.db"));
    ConversationStore store(adb, tickingClock());
    const int64_t conv = store.createConversation("chat");
    store.addMessage(conv, Role::User, "question");
    const int64_t first = store.beginReply(conv);
    QVERIFY(store.finishReply(first, "first answer", MessageState::Complete));
    QCOMPARE(store.message(first)->alternatives, 1);

    const int64_t second = store.beginAlternative(first);
    QVERIFY(store.checkpointReply(second, "second ans"));
    auto msgs = store.messages(conv);
    QCOMPARE(msgs.size(), size_t(2));
    QCOMPARE(msgs[1].id, first);  // still the shown one while the new reply streams
    QCOMPARE(msgs[1].alternative, 1);
    QCOMPARE(msgs[1].alternatives, 2);
    QCOMPARE(store.get(conv)->message_count, int64_t(2));
    auto streaming = *store.message(second);
    QVERIFY(!streaming.shown);
    QCOMPARE(streaming.turn, first);
    QCOMPARE(streaming.alternative, 2);

    // A crash now: the new reply is interrupted and hidden, the earlier one intact and shown.
    QCOMPARE(store.recoverInterrupted(), int64_t(1));
    msgs = store.messages(conv);
    QCOMPARE(msgs.back().text, std::string("first answer"));
    QCOMPARE(msgs.back().state, MessageState::Complete);
    auto turn = store.alternatives(first);
    QCOMPARE(turn.size(), size_t(2));
    QCOMPARE(turn[1].text, std::string("second ans"));
    QCOMPARE(turn[1].state, MessageState::Interrupted);

    // A reply that fails, or is stopped before any text, does not take the turn.
    const int64_t failed = store.beginAlternative(first);
    QVERIFY(store.finishReply(failed, "", MessageState::Error));
    const int64_t stopped = store.beginAlternative(turn[1].id);  // any reply of the turn names it
    QVERIFY(store.finishReply(stopped, "", MessageState::Stopped));
    QCOMPARE(store.messages(conv).back().id, first);
    // One that completes does, in the same transaction as its text.
    const int64_t third = store.beginAlternative(first);
    QVERIFY(store.finishReply(third, "third answer", MessageState::Complete));
    msgs = store.messages(conv);
    QCOMPARE(msgs.size(), size_t(2));
    QCOMPARE(msgs[1].id, third);
    QCOMPARE(msgs[1].alternative, 5);
    QCOMPARE(msgs[1].alternatives, 5);
    QCOMPARE(adb.db().queryInt64("SELECT count(*) FROM messages WHERE shown = 1"), int64_t(2));

    // Paging back: the earlier reply is shown again.
    QVERIFY(store.showAlternative(first));
    QCOMPARE(store.messages(conv).back().text, std::string("first answer"));
    QVERIFY(!store.showAlternative(9999));
    // Every alternative is searchable and the index stays consistent.
    QCOMPARE(store.search("third").size(), size_t(1));
    checkFtsConsistent(adb);

    // Only the last turn gets another reply; a user message is not a reply.
    const int64_t next_user = store.addMessage(conv, Role::User, "next question");
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.beginAlternative(first));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.beginAlternative(next_user));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.beginAlternative(9999));
    // A stopped reply with text takes the turn too.
    const int64_t next = store.beginReply(conv);
    QVERIFY(store.finishReply(next, "complete", MessageState::Complete));
    const int64_t cut = store.beginAlternative(next);
    QVERIFY(store.finishReply(cut, "stopped half", MessageState::Stopped));
    QCOMPARE(store.messages(conv).back().id, cut);
    // Edit-and-resend of the first question drops the turns after it, alternatives included.
    QCOMPARE(store.truncateAfter(conv, msgs[0].id), int64_t(8));
    QCOMPARE(adb.db().queryInt64("SELECT count(*) FROM messages"), int64_t(1));
    checkFtsConsistent(adb);
  }

  // Duplicate copies what the chat shows: the settings, the shown reply of each turn
  // (with its figures), not the other alternatives nor a reply still streaming; the
  // copy is searchable and independent of the original.
  void duplicateCopiesWhatTheChatShows() {
    AppDatabase adb = AppDatabase::open(dbPath("duplicate.db"));
    ConversationStore store(adb, tickingClock());
    const int64_t conv = store.createConversation("trip", "be brief", "{\"temperature\": 0.3}", "/m/a.gguf");
    store.addMessage(conv, Role::User, "where to?");
    const int64_t first = store.beginReply(conv);
    moe::ReplyStats stats;
    stats.completion_tokens = 7;
    stats.decode_tps = 12.5;
    QVERIFY(store.finishReply(first, "the coast", MessageState::Complete, stats));
    const int64_t second = store.beginAlternative(first);
    QVERIFY(store.finishReply(second, "the mountains", MessageState::Complete));
    QVERIFY(store.showAlternative(first));
    store.addMessage(conv, Role::User, "and then?");
    store.beginReply(conv);  // streaming: not copied

    const int64_t copy = store.duplicate(conv);
    QVERIFY(copy > 0 && copy != conv);
    const auto c = store.get(copy);
    QCOMPARE(c->title, std::string("trip (copy)"));
    QCOMPARE(c->system_prompt, std::string("be brief"));
    QCOMPARE(c->sampling_json, std::string("{\"temperature\": 0.3}"));
    QCOMPARE(c->model_path, std::string("/m/a.gguf"));
    const auto msgs = store.messages(copy);
    QCOMPARE(msgs.size(), size_t(3));
    QCOMPARE(msgs[1].text, std::string("the coast"));
    QCOMPARE(msgs[1].alternatives, 1);  // a turn of its own in the copy
    QCOMPARE(*msgs[1].stats.completion_tokens, int64_t(7));
    QCOMPARE(*msgs[1].stats.decode_tps, 12.5);
    QCOMPARE(msgs[2].text, std::string("and then?"));
    for (size_t i = 0; i < msgs.size(); ++i) QCOMPARE(msgs[i].position, int64_t(i));
    QCOMPARE(store.search("coast").size(), size_t(2));
    checkFtsConsistent(adb);
    QVERIFY(store.rename(copy, "other"));
    QCOMPARE(store.get(conv)->title, std::string("trip"));
    QVERIFY(store.softDelete(conv));
    QCOMPARE(store.duplicate(conv), int64_t(0));  // a deleted chat is not copied
    QCOMPARE(store.duplicate(9999), int64_t(0));
  }

  void exportFileNameFollowsTheTitle() {
    using moe::exportFileName;
    QCOMPARE(exportFileName("Penguin facts", "md"), std::string("Penguin facts.md"));
    QCOMPARE(exportFileName("a/b\\c:d*e?f\"g<h>i|j", "json"), std::string("a b c d e f g h i j.json"));
    QCOMPARE(exportFileName("  ..hidden\tand\nlines..  ", "md"), std::string("hidden and lines.md"));
    QCOMPARE(exportFileName("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80", "md"),
             std::string("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80.md"));
    QCOMPARE(exportFileName("bad \xFF\xFE bytes", "md"), std::string("bad bytes.md"));
    QCOMPARE(exportFileName("", "md"), std::string("chat.md"));
    QCOMPARE(exportFileName("/// ...", "md"), std::string("chat.md"));
    // Long titles are cut between characters, never inside one.
    std::string long_title;
    for (int i = 0; i < 40; ++i) long_title += "\xC3\xA9";  // 80 bytes
    long_title = "x" + long_title;
    const std::string cut = exportFileName(long_title, "md");
    QCOMPARE(cut.size(), size_t(1 + 39 * 2 + 3));
    QVERIFY(cut.ends_with("\xC3\xA9.md"));
  }

  void exportMarkdownAndJson() {
    AppDatabase adb = AppDatabase::open(dbPath("export.db"));
    ConversationStore store(adb, tickingClock());
    const std::string title = "Quotes \" and \\ backslashes \xC3\xA9";
    const int64_t conv =
        store.createConversation(title, "System\nprompt", R"({"temperature":0.5})", "/m/x.gguf");
    const std::vector<std::pair<Role, std::string>> texts = {
        {Role::User, "plain"},
        {Role::Assistant, "line1\nline2\r\n\ttab \"q\" \\ back / slash"},
        {Role::User, std::string("ctrl \x01\x1f\x7f and nul \0 end", 22)},
        {Role::Assistant, "emoji \xF0\x9F\x98\x80 cjk \xE6\x97\xA5 rtl \xD7\xA9 sep \xE2\x80\xA8"},
    };
    for (const auto& [role, text] : texts) store.addMessage(conv, role, text);
    const int64_t reply = store.beginReply(conv);
    moe::ReplyStats stats;
    stats.completion_tokens = 3;
    stats.decode_tps = 12.125;
    store.finishReply(reply, "cut short", MessageState::Stopped, stats);

    const auto c = *store.get(conv);
    const auto msgs = store.messages(conv);
    QCOMPARE(msgs.size(), texts.size() + 1);

    const std::string json = moe::conversationToJson(c, msgs);
    QJsonParseError err;
    const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(json), &err);
    QVERIFY2(err.error == QJsonParseError::NoError,
             qPrintable(err.errorString() + " in " + QString::fromStdString(json)));
    const QJsonObject root = doc.object();
    QCOMPARE(root["format"].toString(), QString("moechat-conversation"));
    QCOMPARE(root["title"].toString(), QString::fromStdString(title));
    QCOMPARE(root["system_prompt"].toString(), QString("System\nprompt"));
    QCOMPARE(root["sampling_json"].toString(), QString(R"({"temperature":0.5})"));
    QCOMPARE(root["created_at"].toInteger(), c.created_at);
    const QJsonArray arr = root["messages"].toArray();
    QCOMPARE(arr.size(), qsizetype(msgs.size()));
    for (qsizetype i = 0; i < arr.size(); ++i) {
      const QJsonObject m = arr[i].toObject();
      const auto& orig = msgs[size_t(i)];
      QCOMPARE(m["text"].toString().toUtf8(), QByteArray::fromStdString(orig.text));
      QCOMPARE(m["role"].toString(), QString(moe::toString(orig.role)));
      QCOMPARE(m["state"].toString(), QString(moe::toString(orig.state)));
      QCOMPARE(m["id"].toInteger(), orig.id);
    }
    const QJsonObject last = arr.last().toObject();
    QCOMPARE(last["state"].toString(), QString("stopped"));
    QCOMPARE(last["completion_tokens"].toInteger(), qint64(3));
    QCOMPARE(last["decode_tps"].toDouble(), 12.125);
    QVERIFY(last["prompt_tokens"].isNull());
    QVERIFY(last["stop_reason"].isNull());

    const std::string md = moe::conversationToMarkdown(c, msgs);
    QVERIFY(md.rfind("# " + title + "\n", 0) == 0);
    QVERIFY(md.find("## System prompt\n\nSystem\nprompt\n") != std::string::npos);
    // Every text in order, verbatim but for control characters (U+FFFD instead): no
    // NUL, ESC or other control byte reaches the file, and the file is valid UTF-8.
    const std::string ctrl_shown = "ctrl \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD and nul \xEF\xBF\xBD end";
    size_t at = 0;
    for (const auto& m : msgs) {
      const std::string shown = m.text.find('\x01') != std::string::npos ? ctrl_shown : m.text;
      const size_t found = md.find(shown, at);
      QVERIFY2(found != std::string::npos, shown.c_str());
      at = found + shown.size();
    }
    for (unsigned char ch : md) QVERIFY(ch >= 0x20 || ch == '\n' || ch == '\t' || ch == '\r');
    QCOMPARE(QString::fromUtf8(md).toUtf8(), QByteArray::fromStdString(md));
    moe::Conversation hostile = c;
    hostile.title = "esc \x1b[31m red \xC2\x9B csi, bad \xFF\xC3 bytes";
    const std::string hostile_md = moe::conversationToMarkdown(hostile, {});
    QVERIFY2(hostile_md.rfind(
                 "# esc \xEF\xBF\xBD[31m red \xEF\xBF\xBD csi, bad \xEF\xBF\xBD\xEF\xBF\xBD bytes\n", 0) == 0,
             hostile_md.c_str());
    QVERIFY(md.find("*(reply stopped)*") != std::string::npos);
    QVERIFY(md.find("`/m/x.gguf`") != std::string::npos);
  }

  // (Plain literals here: moc 6.4 mis-lexes raw strings that hold backslashes.)
  void jsonQuoteEscapesAndRepairs() {
    QCOMPARE(moe::jsonQuote("a\"b\\c"), std::string("\"a\\\"b\\\\c\""));
    QCOMPARE(moe::jsonQuote(std::string("\0\x01\n\x1f", 4)), std::string("\"\\u0000\\u0001\\n\\u001f\""));
    QCOMPARE(moe::jsonQuote("\xC3\xA9\xF0\x9F\x98\x80"), std::string("\"\xC3\xA9\xF0\x9F\x98\x80\""));
    // Invalid UTF-8 (a lone continuation byte, an overlong '/', a surrogate, a truncated sequence) becomes
    // U+FFFD.
    const std::string bad = "\x80|\xC0\xAF|\xED\xA0\x80|\xE2\x82";
    const std::string quoted = moe::jsonQuote(bad);
    const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString("[" + quoted + "]"));
    QVERIFY(doc.isArray());
    const QString back = doc.array()[0].toString();
    QVERIFY(back.startsWith(QChar(0xFFFD)));
    QVERIFY(!back.contains(QChar(0xD800)));
    QCOMPARE(back.count(QChar('|')), 3);
  }

  // What the window says at start about replies the last stop cut off: English for
  // one and for several, naming their chats.
  void recoveredRepliesAreNamedInEnglish() {
    QCOMPARE(
        QString::fromStdString(moe::recoveredRepliesNotice(1, {"Recipes"})),
        QString("A reply in \u201cRecipes\u201d was cut off when moechat last stopped; its text so far is "
                "kept."));
    QCOMPARE(QString::fromStdString(moe::recoveredRepliesNotice(2, {"Recipes", ""})),
             QString("2 replies in \u201cRecipes\u201d and an untitled chat were cut off when moechat last "
                     "stopped; their text so far is kept."));
    QCOMPARE(QString::fromStdString(moe::recoveredRepliesNotice(5, {"A", "B", "C", "D", "E"})),
             QString("5 replies in \u201cA\u201d, \u201cB\u201d and 3 other chats were cut off when moechat "
                     "last stopped; their text so far is kept."));
    QCOMPARE(QString::fromStdString(moe::recoveredRepliesNotice(3, {"A", "B", "C"})),
             QString("3 replies in \u201cA\u201d, \u201cB\u201d and \u201cC\u201d were cut off when moechat "
                     "last stopped; their text so far is kept."));
    QVERIFY(moe::recoveredRepliesNotice(0, {}).empty());
  }

  void downloadsRoundTripAndSurviveReopen() {
    const std::string path = dbPath("downloads.db");
    int64_t a = 0, b = 0;
    {
      AppDatabase adb = AppDatabase::open(path);
      moe::DownloadStore store(adb);
      moe::DownloadRecord rec;
      rec.url = "https://example.org/a.gguf";
      rec.dest_path = "/models/a.gguf";
      rec.sha256 = std::string(64, 'A');  // upper case is accepted, stored lower case
      rec.expected_size = 1000;
      rec.catalog_id = "qwen-a";
      a = store.add(rec);
      rec.url = "https://example.org/b.gguf";
      rec.dest_path = "/models/b.gguf";
      rec.sha256.clear();
      rec.expected_size = -7;  // "unknown" in any negative spelling
      b = store.add(rec);
      QVERIFY(a > 0 && b > a);

      auto got = store.get(a);
      QVERIFY(got.has_value());
      QCOMPARE(got->state, std::string("queued"));
      QCOMPARE(got->sha256, sha('a'));
      QCOMPARE(got->expected_size, int64_t(1000));
      QVERIFY(got->created_at > 0 && got->updated_at == got->created_at);
      QCOMPARE(store.get(b)->expected_size, int64_t(-1));

      QVERIFY(store.setState(a, "running"));
      QVERIFY(store.setBytesDone(a, 400));
      QVERIFY(store.update(b, "failed", 10, "HTTP 404"));
      QVERIFY(!store.setState(9999, "running"));  // unknown id: reported, not thrown
      QVERIFY(!store.setBytesDone(9999, 1));
    }
    // A restart finds the queue as it was left.
    AppDatabase adb = AppDatabase::open(path);
    moe::DownloadStore store(adb);
    auto pending = store.unfinished();
    QCOMPARE(pending.size(), size_t(2));
    QCOMPARE(pending[0].id, a);
    QCOMPARE(pending[0].state, std::string("running"));
    QCOMPARE(pending[0].bytes_done, int64_t(400));
    QCOMPARE(pending[1].state, std::string("failed"));
    QCOMPARE(pending[1].error, std::string("HTTP 404"));

    QVERIFY(store.update(a, "done", 1000));
    pending = store.unfinished();
    QCOMPARE(pending.size(), size_t(1));
    QCOMPARE(pending[0].id, b);
    QCOMPARE(store.all().size(), size_t(2));
    QVERIFY(store.remove(b));
    QVERIFY(!store.remove(b));
    QVERIFY(!store.get(b).has_value());
    QVERIFY(store.unfinished().empty());
  }

  void downloadsRejectBadInput() {
    AppDatabase adb = AppDatabase::open(dbPath("downloads-bad.db"));
    moe::DownloadStore store(adb);
    moe::DownloadRecord rec;
    rec.url = "https://example.org/a.gguf";
    rec.dest_path = "/models/a.gguf";
    int64_t id = store.add(rec);
    auto bad = rec;
    bad.state = "exploded";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.add(bad));
    bad = rec;
    bad.sha256 = "abc";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.add(bad));
    bad.sha256 = std::string(63, 'a') + "g";
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.add(bad));
    bad = rec;
    bad.url.clear();
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.add(bad));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.setState(id, "RUNNING"));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.setBytesDone(id, -1));
    QCOMPARE(store.all().size(), size_t(1));
    QCOMPARE(store.get(id)->state, std::string("queued"));
  }

  void modelsUpsertByPath() {
    AppDatabase adb = AppDatabase::open(dbPath("models.db"));
    moe::ModelRegistry reg(adb);
    moe::ModelRecord m;
    m.path = "/models/b.gguf";
    m.name = "Beta";
    m.arch = "qwen2moe";
    m.quant = "Q4_K";
    m.size_bytes = 123;
    int64_t b = reg.upsert(m);
    m.path = "/models/a.gguf";
    m.name = "Alpha";
    m.sha256 = sha('c');
    int64_t a = reg.upsert(m);
    QVERIFY(a != b);
    const int64_t added = reg.findByPath("/models/a.gguf")->added_at;
    QVERIFY(added > 0);

    // Same path again: the row is updated in place (same id, same added_at).
    m.name = "Alpha v2";
    m.size_bytes = 456;
    m.sha256 = std::string(64, 'C');
    QCOMPARE(reg.upsert(m), a);
    auto got = reg.findByPath("/models/a.gguf");
    QVERIFY(got.has_value());
    QCOMPARE(got->name, std::string("Alpha v2"));
    QCOMPARE(got->size_bytes, int64_t(456));
    QCOMPARE(got->sha256, sha('c'));
    QCOMPARE(got->added_at, added);

    auto all = reg.list();
    QCOMPARE(all.size(), size_t(2));
    QCOMPARE(all[0].name, std::string("Alpha v2"));  // by name
    QCOMPARE(all[1].name, std::string("Beta"));

    // A copy of the same file elsewhere shares the hash.
    m.path = "/backup/a.gguf";
    reg.upsert(m);
    QCOMPARE(reg.findBySha256(std::string(64, 'C')).size(), size_t(2));
    QVERIFY(reg.findBySha256(sha('d')).empty());
    QVERIFY(reg.findBySha256("").empty());  // "not hashed" never matches the unhashed Beta
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, reg.findBySha256("zz"));

    QVERIFY(reg.remove(b));
    QVERIFY(!reg.remove(b));
    QVERIFY(!reg.findByPath("/models/b.gguf").has_value());
    m.path.clear();
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, reg.upsert(m));
  }
};

QTEST_GUILESS_MAIN(PersistStoreTest)
#include "test_persist_store.moc"
