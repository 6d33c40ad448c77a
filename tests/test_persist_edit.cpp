// Edit-and-resend in the store (ConversationStore::editForResend): the message's new
// text; the replies to it kept, each remembering the wording it answered; the later
// turns deleted; the JSON and Markdown exports carry the wording. Qt Test on a real
// SQLite file.
#include <QTemporaryDir>
#include <QtTest>

#include "app/core/app_database.h"
#include "app/core/chat_export.h"
#include "app/core/conversation_store.h"

using namespace moe;

namespace {

ConversationStore::Clock tickingClock() {
  auto t = std::make_shared<int64_t>(1700000000000);
  return [t] { return (*t)++; };
}

int64_t reply(ConversationStore& store, int64_t conv, const std::string& text) {
  const int64_t id = store.beginReply(conv);
  store.finishReply(id, text, MessageState::Complete);
  return id;
}

}  // namespace

class PersistEditTest : public QObject {
  Q_OBJECT
 private:
  QTemporaryDir dir_;

 private slots:
  void editingKeepsTheRepliesAndTheirWording() {
    AppDatabase adb = AppDatabase::open(dir_.filePath("edit.db").toStdString());
    ConversationStore store(adb, tickingClock());
    const int64_t conv = store.createConversation("Chat");
    const int64_t q1 = store.addMessage(conv, Role::User, "Frist question");
    const int64_t a1 = reply(store, conv, "Old answer");
    store.addMessage(conv, Role::User, "Second question");
    reply(store, conv, "Second answer");

    const int64_t kept = store.editForResend(conv, q1, "First question");
    QCOMPARE(kept, a1);  // the new reply is begun as its alternative
    const auto msgs = store.messages(conv);
    QCOMPARE(msgs.size(), size_t(2));  // the later turn went
    QCOMPARE(msgs[0].text, std::string("First question"));
    QCOMPARE(msgs[1].answered, std::string("Frist question"));
    const int64_t a2 = store.beginAlternative(kept);
    store.finishReply(a2, "New answer", MessageState::Complete);
    QCOMPARE(store.messages(conv).back().id, a2);
    QVERIFY(store.messages(conv).back().answered.empty());  // it answers the message as it reads

    // A second edit: the first reply keeps the first wording, the second gets its own.
    QCOMPARE(store.editForResend(conv, q1, "First question, again"), a2);
    const auto turn = store.alternatives(a1);
    QCOMPARE(turn.size(), size_t(2));
    QCOMPARE(turn[0].answered, std::string("Frist question"));
    QCOMPARE(turn[1].answered, std::string("First question"));

    // A copy of the chat as shown keeps what the shown reply answered.
    QVERIFY(store.showAlternative(a1));
    const int64_t copy = store.duplicate(conv);
    QVERIFY(copy != 0);
    QCOMPARE(store.messages(copy).back().text, std::string("Old answer"));
    QCOMPARE(store.messages(copy).back().answered, std::string("Frist question"));

    // The exports say which wording each reply answered.
    const auto conversation = store.get(conv);
    const std::string json = conversationToJson(*conversation, store.messagesWithAlternatives(conv));
    QVERIFY2(json.find("\"answered\": \"Frist question\"") != std::string::npos, json.c_str());
    const std::string md = conversationToMarkdown(*conversation, store.messagesWithAlternatives(conv));
    QVERIFY2(md.find("earlier wording of the message:* Frist question") != std::string::npos, md.c_str());
  }

  void aMessageWithoutAReplyAndOneUnchanged() {
    AppDatabase adb = AppDatabase::open(dir_.filePath("edit2.db").toStdString());
    ConversationStore store(adb, tickingClock());
    const int64_t conv = store.createConversation("Chat");
    const int64_t q = store.addMessage(conv, Role::User, "Alone");
    QCOMPARE(store.editForResend(conv, q, "Alone, edited"), int64_t(0));  // no reply to keep
    const int64_t a = reply(store, conv, "An answer");
    QCOMPARE(store.editForResend(conv, q, "Alone, edited"), a);  // sent again as it was
    QVERIFY(store.message(a)->answered.empty());                 // it answered this very wording
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, store.editForResend(conv, a, "a reply is no question"));
  }
};

QTEST_MAIN(PersistEditTest)
#include "test_persist_edit.moc"
