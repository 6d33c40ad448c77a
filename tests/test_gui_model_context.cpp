// The context length in the model menu: the button beside the model combo lists the
// lengths the loaded model offers with the KV cache each takes; a choice is the
// model's own setting (the settings dialog's), reloads the model with it, and the
// loaded plan's KV cache follows. A message too long for it names where to raise it.
#include <QAction>
#include <QMenu>
#include <QSignalSpy>
#include <QTest>

#include "app/core/fit_words.h"
#include "app/core/local_chat_engine.h"
#include "support/gui_fixture.h"
#include "ui/composer.h"
#include "ui/context_button.h"

using namespace moe;

namespace {

QAction* actionFor(ContextButton* button, int tokens) {
  for (QAction* a : button->menu()->actions())
    if (a->data().toInt() == tokens) return a;
  return nullptr;
}

}  // namespace

class GuiModelContext : public QObject {
  Q_OBJECT

 private slots:
  void choicesAreTheTrainedLengths() {
    const std::vector<int> c = contextChoices(4096, 32768);
    QCOMPARE(c, (std::vector<int>{1024, 2048, 4096, 8192, 16384, 32768}));
    // A trained length that is not a power of two, and a setting between two.
    QCOMPARE(contextChoices(3000, 6000), (std::vector<int>{1024, 2048, 3000, 4096, 6000}));
    // A small model's short lengths.
    QCOMPARE(contextChoices(1024, 1024), (std::vector<int>{256, 512, 1024}));
  }

  void theModelMenuSetsTheContextTheEngineLoadsWith() {
    test::GuiApp app(std::make_unique<LocalChatEngine>());
    QVERIFY(app.loadDemo());
    ContextButton* button = app.window->contextButton();
    QVERIFY(button);
    QVERIFY(button->isEnabled());
    const LoadedModelInfo before = *app.chat->model();
    QCOMPARE(button->current(), before.n_ctx);
    QVERIFY(before.plan.fit.kv_bytes > 0);
    QVERIFY2(button->text().contains(QLocale().toString(before.n_ctx)), qPrintable(button->text()));
    // The loaded length is checked and says what its KV cache takes.
    QAction* loaded = actionFor(button, before.n_ctx);
    QVERIFY(loaded);
    QVERIFY(loaded->isChecked());
    QVERIFY2(loaded->text().contains(QString::fromStdString(formatBytes(before.plan.fit.kv_bytes))),
             qPrintable(loaded->text()));

    const int target = button->choices().front();  // the shortest
    QVERIFY2(target != before.n_ctx, qPrintable(QString::number(target)));
    QSignalSpy loadedSpy(app.chat, &ChatController::modelLoaded);
    actionFor(button, target)->trigger();
    QVERIFY(loadedSpy.wait(60000));

    const LoadedModelInfo& after = *app.chat->model();
    QCOMPARE(after.n_ctx, target);
    QCOMPARE(after.plan.n_ctx, target);
    QCOMPARE(app.settings->contextLength(QString()), target);  // the model's setting, as the dialog's
    // The KV cache is sized for the new context: in proportion to it.
    QVERIFY(after.plan.fit.kv_bytes < before.plan.fit.kv_bytes);
    QCOMPARE(after.plan.fit.kv_bytes * static_cast<uint64_t>(before.n_ctx),
             before.plan.fit.kv_bytes * static_cast<uint64_t>(target));
    QCOMPARE(button->current(), target);
    QVERIFY(actionFor(button, target)->isChecked());

    // A message longer than the context says where the setting is.
    QSignalSpy errors(app.chat, &ChatController::error);
    QString longer;
    for (int i = 0; i < 300; ++i) longer += "many more words ";
    QVERIFY(app.chat->send(longer));
    QVERIFY(errors.wait(60000));
    const QString why = errors.at(0).at(0).toString();
    QVERIFY2(why.contains(QString("the context holds %1").arg(target)) &&
                 why.contains("Context button beside the model menu") && !why.contains("--ctx"),
             qPrintable(why));
  }

  // Without a model the button is off; "Other length…" is the settings dialog's field.
  void withoutAModelTheButtonIsOff() {
    test::GuiApp app(std::make_unique<LocalChatEngine>());
    QVERIFY(!app.window->contextButton()->isEnabled());
    QVERIFY(app.window->contextButton()->choices().empty());
  }
};

QTEST_MAIN(GuiModelContext)
#include "test_gui_model_context.moc"
