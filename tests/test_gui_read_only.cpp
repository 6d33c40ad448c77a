// A chat database moechat may not write, read from a copy (openChatDatabase's
// ReadACopy): the window shows the chats and says why nothing can be changed; typing,
// sending, new chats, renames, duplicates and deletes are refused before anything is
// written, while reading, searching and exporting work.
#include <QAction>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QSignalSpy>
#include <QTest>

#include "support/fake_chat_engine.h"
#include "support/gui_fixture.h"
#include "ui/chat_view.h"
#include "ui/composer.h"
#include "ui/conversation_list_model.h"

using namespace moe;

class GuiReadOnlyTest : public QObject {
  Q_OBJECT

 private slots:
  void readOnlyWindowShowsTheChatsAndRefusesChanges() {
    auto engine = std::make_unique<test::FakeChatEngine>();
    engine->words = {"a reply to keep"};
    test::GuiApp app(std::move(engine));
    QVERIFY(app.loadDemo());
    MainWindow& w = *app.window;
    QVERIFY(app.chat->send("the question"));
    QTRY_VERIFY(!app.chat->busy());
    const qint64 conv = app.chat->current();
    const auto before = app.store->messages(conv);
    QCOMPARE(before.size(), size_t(2));
    const std::string title = app.store->get(conv)->title;

    const QString why =
        "Read-only: moechat may not write /somewhere/moechat.db, so you are reading a copy of it.";
    w.setReadOnly(why);
    QSignalSpy errors(app.chat, &ChatController::error);

    // What the user sees: the reason above the chat and in the message field.
    QVERIFY(w.noticeBar()->isVisible());
    bool shown = false;
    for (auto* label : w.noticeBar()->findChildren<QLabel*>()) shown |= label->text() == why;
    QVERIFY(shown);
    auto* edit = w.composer()->editor();
    QVERIFY(edit->isReadOnly());
    QCOMPARE(edit->placeholderText(), why);
    QVERIFY(!w.composer()->button()->isEnabled());
    QVERIFY(!w.findChild<QPushButton*>("newChatButton")->isEnabled());

    // Typing and Enter send nothing. Sending is synchronous (the message is written
    // and the reply begun before Enter returns), so what Enter did is seen at once.
    QSignalSpy busy(app.chat, &ChatController::busyChanged);
    edit->setFocus();
    QTest::keyClicks(edit, "one more");
    QTest::keyClick(edit, Qt::Key_Return);
    QVERIFY(!app.chat->busy());
    QCOMPARE(busy.count(), 0);  // no reply began (and ended) either
    QCOMPARE(app.store->messages(conv).size(), before.size());

    // Every change is refused, naming the reason, and nothing is written.
    const size_t chats = app.store->list().size();
    QVERIFY(!app.chat->send("sent anyway"));
    QCOMPARE(app.chat->newConversation(), qint64(0));
    QCOMPARE(app.chat->duplicateConversation(conv), qint64(0));
    QVERIFY(!app.chat->deleteConversation(conv));
    QVERIFY(!app.chat->regenerate());
    app.chat->setSystemPrompt("be brief");
    QVERIFY(errors.count() >= 5);
    for (const auto& e : errors) QVERIFY2(e.at(0).toString().contains(why), qPrintable(e.at(0).toString()));
    auto* model = w.conversationModel();
    const QModelIndex row = model->index(model->rowOf(conv));
    QVERIFY(!(model->flags(row) & Qt::ItemIsEditable));
    QVERIFY(!model->setData(row, "renamed", Qt::EditRole));
    const auto menu = w.conversationMenu(model->rowOf(conv));
    QStringList enabled;
    for (QAction* a : menu->actions())
      if (!a->isSeparator() && a->isEnabled()) enabled << a->text();
    QCOMPARE(enabled, (QStringList{"Export as Markdown…", "Export as JSON…"}));

    QCOMPARE(app.store->list().size(), chats);
    const auto after = app.store->messages(conv);
    QCOMPARE(after.size(), before.size());
    QCOMPARE(after.back().text, before.back().text);
    QCOMPARE(app.store->get(conv)->title, title);
    QVERIFY(app.store->get(conv)->system_prompt.empty());

    // Reading still works: the chat is shown, and it exports.
    QCOMPARE(w.chatView()->bubbleCount(), 2);
    const QString exported = app.dir.filePath("chat.md");
    w.exportCurrent(exported);
    QFile file(exported);
    QVERIFY(file.open(QIODevice::ReadOnly));
    QVERIFY(file.readAll().contains("a reply to keep"));
  }
};

QTEST_MAIN(GuiReadOnlyTest)
#include "test_gui_read_only.moc"
