// The user's conversations as training prompts (a real SQLite file): only the
// user's turns, only live conversations, newest first, capped, blank and
// repeated texts left out.
#include <QTemporaryDir>
#include <QtTest>

#include "app/core/app_database.h"
#include "app/core/conversation_prompts.h"
#include "app/core/conversation_store.h"

using namespace moe;

class TestConversationPrompts : public QObject {
  Q_OBJECT

  QTemporaryDir dir_;
  int n_ = 0;

  AppDatabase open() { return AppDatabase::open(dir_.filePath(QString("c%1.db").arg(++n_)).toStdString()); }

 private slots:
  void userTurnsOfLiveConversationsNewestFirst() {
    AppDatabase db = open();
    int64_t now = 1000;
    ConversationStore store(db, [&now] { return now++; });
    const int64_t a = store.createConversation("a");
    const int64_t b = store.createConversation("b");
    const int64_t gone = store.createConversation("deleted");
    store.addMessage(a, Role::System, "system text");
    store.addMessage(a, Role::User, "first question");
    store.addMessage(a, Role::Assistant, "an answer");
    store.addMessage(b, Role::User, "  second question\n");
    store.addMessage(gone, Role::User, "from a deleted chat");
    store.addMessage(a, Role::User, "third question");
    store.addMessage(b, Role::User, "   ");             // blank
    store.addMessage(b, Role::User, "first question");  // a repeat: counts once, here (newest)
    QVERIFY(store.softDelete(gone));

    const std::vector<std::string> want = {"first question", "third question", "second question"};
    QCOMPARE(conversationPrompts(db, 10), want);
    QCOMPARE(conversationPromptCount(db), 3);
    QCOMPARE(conversationPrompts(db, 2), std::vector<std::string>(want.begin(), want.begin() + 2));
    QVERIFY(conversationPrompts(db, 0).empty());

    QVERIFY(store.restore(gone));  // restored: its turns count again
    QCOMPARE(conversationPromptCount(db), 4);
    const std::vector<std::string> all = {"first question", "third question", "from a deleted chat",
                                          "second question"};
    QCOMPARE(conversationPrompts(db, 10), all);
  }

  void emptyDatabaseGivesNone() {
    AppDatabase db = open();
    QVERIFY(conversationPrompts(db, 5).empty());
    QCOMPARE(conversationPromptCount(db), 0);
  }
};

QTEST_GUILESS_MAIN(TestConversationPrompts)
#include "test_predictor_conversation_prompts.moc"
