// The composer's Think switch: shown for a model whose template can turn its
// reasoning off, kept in the settings across restarts, and given to the engine with
// each reply (ChatEngine::setChatOptions); hidden for a model without the switch.
#include <QPushButton>
#include <QTest>

#include "support/fake_chat_engine.h"
#include "support/gui_fixture.h"
#include "ui/composer.h"

using namespace moe;

namespace {

std::unique_ptr<test::FakeChatEngine> engineWithSwitch(bool has_switch) {
  auto engine = std::make_unique<test::FakeChatEngine>();
  engine->thinking_switch = has_switch;
  return engine;
}

}  // namespace

class GuiThinkingTest : public QObject {
  Q_OBJECT

 private slots:
  void theSwitchReachesTheEngineAndIsKept() {
    auto first = engineWithSwitch(true);
    test::FakeChatEngine& engine = *first;
    test::GuiApp app(std::move(first));
    QVERIFY(app.loadDemo());
    QPushButton* think = app.window->composer()->thinkButton();
    QVERIFY(think->isVisible());
    QVERIFY(think->isChecked());  // on unless the user turns it off
    QVERIFY(app.chat->send("with reasoning"));
    QTRY_VERIFY(!app.chat->busy());
    QCOMPARE(engine.replies_thinking.load(), 1);

    think->click();
    QVERIFY(!think->isChecked());
    QVERIFY(!app.settings->thinking());
    QVERIFY(app.chat->send("answer at once"));
    QTRY_VERIFY(!app.chat->busy());
    QCOMPARE(engine.replies_not_thinking.load(), 1);
    QCOMPARE(engine.replies_thinking.load(), 1);

    // The app started again on the same settings: the switch is still off.
    auto second = engineWithSwitch(true);
    test::FakeChatEngine& again = *second;
    app.reopen(std::move(second));
    QVERIFY(app.loadDemo());
    think = app.window->composer()->thinkButton();
    QVERIFY(think->isVisible());
    QVERIFY(!think->isChecked());
    QVERIFY(app.chat->send("still at once"));
    QTRY_VERIFY(!app.chat->busy());
    QCOMPARE(again.replies_not_thinking.load(), 1);
  }

  void hiddenForAModelWithoutTheSwitch() {
    test::GuiApp app(engineWithSwitch(false));
    QVERIFY(app.loadDemo());
    QVERIFY(!app.window->composer()->thinkButton()->isVisible());
    QVERIFY(app.window->composer()->button()->isVisible());
  }
};

QTEST_MAIN(GuiThinkingTest)
#include "test_gui_thinking.moc"
