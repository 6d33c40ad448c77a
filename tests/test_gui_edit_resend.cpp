// Edit-and-resend keeps what the turn had: the replies to the message edited stay as
// alternatives of its turn (paged with "< 1/2 >"), each saying which wording it
// answered; the messages after that turn go. What the chat shows after a restart
// comes from the database file alone.
#include <QLabel>
#include <QPlainTextEdit>
#include <QTest>
#include <QToolButton>

#include "support/fake_chat_engine.h"
#include "support/gui_fixture.h"
#include "ui/chat_view.h"
#include "ui/composer.h"

using namespace moe;

namespace {

void type(test::GuiApp& app, const QString& text) {
  auto* edit = app.window->composer()->editor();
  edit->setFocus();
  QTest::keyClicks(edit, text);
  QTest::keyClick(edit, Qt::Key_Return);
}

QToolButton* bubbleButton(test::GuiApp& app, int bubble, const QString& text) {
  for (auto* b : app.window->chatView()->bubble(bubble)->findChildren<QToolButton*>())
    if (b->text() == text) return b;
  return nullptr;
}

std::unique_ptr<test::FakeChatEngine> engineSaying(std::vector<std::string> words) {
  auto e = std::make_unique<test::FakeChatEngine>();
  e->words = std::move(words);
  return e;
}

}  // namespace

class GuiEditResend : public QObject {
  Q_OBJECT

 private slots:
  void theEarlierReplyIsKeptAsAnAlternative() {
    auto engine = engineSaying({"Old", " answer"});
    test::FakeChatEngine* fake = engine.get();
    test::GuiApp app(std::move(engine));
    QVERIFY(app.loadDemo());
    type(app, "Frist question");
    QTRY_VERIFY(!app.chat->busy());
    type(app, "Second question");
    QTRY_VERIFY(!app.chat->busy());
    const qint64 conv = app.chat->current();
    const auto before = app.store->messages(conv);
    QCOMPARE(before.size(), size_t(4));
    const qint64 question = before[0].id, old_reply = before[1].id;

    // Edit mode: the banner, Resend, the message framed.
    fake->words = {"New", " answer"};
    QTest::mouseClick(bubbleButton(app, 0, "Edit"), Qt::LeftButton);
    Composer* composer = app.window->composer();
    QVERIFY(composer->editBanner()->isVisible());
    QVERIFY2(composer->editBanner()->text().startsWith(
                 "Editing: Enter resends, Esc cancels. The earlier reply stays"),
             qPrintable(composer->editBanner()->text()));
    QCOMPARE(composer->button()->text(), QString("Resend"));
    QCOMPARE(app.window->chatView()->foundMessage(), question);
    composer->editor()->selectAll();
    QTest::keyClicks(composer->editor(), "First question");
    QTest::keyClick(composer->editor(), Qt::Key_Return);
    QTRY_VERIFY_WITH_TIMEOUT(!app.chat->busy(), 20000);
    QCOMPARE(fake->replies.load(), 3);
    {
      std::lock_guard lock(fake->mu_);  // the new reply was asked for the edited question alone
      QCOMPARE(fake->last_messages.size(), size_t(1));
      QCOMPARE(fake->last_messages.back().content, std::string("First question"));
    }
    const auto after = app.store->messages(conv);
    QCOMPARE(after.size(), size_t(2));  // the later turn went
    QCOMPARE(after[0].text, std::string("First question"));
    QCOMPARE(after[1].text, std::string("New answer"));
    QCOMPARE(after[1].alternatives, 2);
    QCOMPARE(app.store->alternatives(old_reply).size(), size_t(2));

    // After a restart, from the file: the old reply is one page back, saying what it answered.
    app.reopen(std::make_unique<test::FakeChatEngine>());
    app.chat->openConversation(conv);
    ChatView* view = app.window->chatView();
    QCOMPARE(view->bubbleCount(), 2);
    QCOMPARE(view->bubble(0)->renderedText(), QString("First question"));
    QCOMPARE(view->bubble(1)->renderedText(), QString("New answer"));
    QCOMPARE(view->bubble(1)->findChild<QLabel*>("replyPager")->text(), QString("2/2"));
    QTest::mouseClick(view->bubble(1)->findChild<QToolButton*>("previousReply"), Qt::LeftButton);
    QCOMPARE(view->bubble(1)->item().id, old_reply);
    QCOMPARE(view->bubble(1)->renderedText(), QString("Old answer"));
    QCOMPARE(view->bubble(1)->findChild<QLabel*>("replyPager")->text(), QString("1/2"));
    QVERIFY2(view->bubble(1)->item().footer.contains("earlier wording, “Frist question”"),
             qPrintable(view->bubble(1)->item().footer));
    QCOMPARE(app.store->message(old_reply)->answered, std::string("Frist question"));
  }

  // Esc ends the edit: the banner, the frame and Resend go, the box is empty again.
  void escapeEndsTheEdit() {
    test::GuiApp app(engineSaying({"An", " answer"}));
    QVERIFY(app.loadDemo());
    type(app, "A question");
    QTRY_VERIFY(!app.chat->busy());
    QTest::mouseClick(bubbleButton(app, 0, "Edit"), Qt::LeftButton);
    Composer* composer = app.window->composer();
    QCOMPARE(composer->text(), QString("A question"));
    QTest::keyClick(app.window.get(), Qt::Key_Escape);
    QVERIFY(!composer->editBanner()->isVisible());
    QCOMPARE(composer->button()->text(), QString("Send"));
    QCOMPARE(app.window->chatView()->foundMessage(), qint64(0));
    QVERIFY(composer->text().isEmpty());
  }
};

QTEST_MAIN(GuiEditResend)
#include "test_gui_edit_resend.moc"
