// The app assembled for GUI tests: a real SQLite database and INI settings in a
// temporary folder, the engine thread with a given engine (scripted or real),
// the chat controller and the main window, shown offscreen.
#pragma once

#include <QElapsedTimer>
#include <QSettings>
#include <QTemporaryDir>
#include <QTest>
#include <memory>
#include <optional>

#include "app/core/app_database.h"
#include "app/core/conversation_store.h"
#include "app/qt/app_settings.h"
#include "app/qt/chat_controller.h"
#include "app/qt/inference_worker.h"
#include "ui/main_window.h"

namespace moe::test {

// Handles every event queued so far, and those they queue in turn (layouts, scroll
// bars, resizes, palette changes), without waiting for time to pass: what a check
// of settled geometry needs, on a fast machine or a slow one.
inline void settle() {
  for (int round = 0; round < 10; ++round) {
    QCoreApplication::sendPostedEvents();
    QCoreApplication::processEvents();
  }
}

// Names each stage of a long case in the test's log with the time since the case
// began, so a case stopped from outside (QtTest's function timeout, CTest's) shows
// which wait it was in and how long the stages before it took.
class StepLog {
 public:
  StepLog() { clock_.start(); }
  void operator()(const char* stage) const {
    qInfo("stage: %s (%lld ms into the case)", stage, static_cast<long long>(clock_.elapsed()));
  }

 private:
  QElapsedTimer clock_;
};

struct GuiApp {
  QTemporaryDir dir;
  std::optional<AppDatabase> db;
  std::unique_ptr<ConversationStore> store;
  std::unique_ptr<QSettings> ini;
  std::unique_ptr<AppSettings> settings;
  std::unique_ptr<EngineHost> engine;
  std::unique_ptr<ChatController> chat;
  std::unique_ptr<MainWindow> window;

  explicit GuiApp(std::unique_ptr<ChatEngine> e) {
    ini = std::make_unique<QSettings>(dir.filePath("moechat.ini"), QSettings::IniFormat);
    settings = std::make_unique<AppSettings>(*ini);
    open(std::move(e));
  }
  ~GuiApp() { close(); }

  // The app closed and started again on the same data folder: what it shows comes
  // from the database file alone. No model is loaded after it.
  void reopen(std::unique_ptr<ChatEngine> e) {
    close();
    open(std::move(e));
  }

 private:
  void open(std::unique_ptr<ChatEngine> e) {
    db.emplace(AppDatabase::open(dir.filePath("moechat.db").toStdString()));
    store = std::make_unique<ConversationStore>(*db);
    engine = std::make_unique<EngineHost>(std::move(e));
    chat = std::make_unique<ChatController>(*store, *engine, *settings);
    window = std::make_unique<MainWindow>(*settings, *store, *chat, *engine);
    window->show();
  }
  void close() {
    window.reset();
    chat.reset();
    engine.reset();  // joins the engine thread before the store goes
    store.reset();
    db.reset();
  }

 public:
  // Loads the demo model (the scripted engine ignores the file) and waits for it.
  bool loadDemo(int timeout_ms = 60000) {
    window->loadModel({"Demo model", QString(), QString()});
    QDeadlineTimer deadline(timeout_ms);
    while (!chat->modelReady() && !deadline.hasExpired()) QTest::qWait(10);
    return chat->modelReady();
  }
};

}  // namespace moe::test
