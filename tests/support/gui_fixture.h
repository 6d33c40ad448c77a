// The app assembled for GUI tests: a real SQLite database and INI settings in a
// temporary folder, the engine thread with a given engine (scripted or real),
// the chat controller (ChatApp, as the desktop program builds them) and the main
// window, shown offscreen.
#pragma once

#include <QElapsedTimer>
#include <QSettings>
#include <QTemporaryDir>
#include <QTest>
#include <memory>
#include <optional>
#include <string>

#include "app/core/app_database.h"
#include "app/core/conversation_store.h"
#include "app/qt/app_settings.h"
#include "app/qt/chat_app.h"
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

// A data folder of the app's own in a temporary folder: the INI settings (whose
// data folder is this one, so traces and downloads stay in it) and the path of
// the SQLite database.
struct TestDataFolder {
  QTemporaryDir dir;
  std::unique_ptr<QSettings> ini;
  std::unique_ptr<AppSettings> settings;

  TestDataFolder()
      : ini(std::make_unique<QSettings>(dir.filePath("moechat.ini"), QSettings::IniFormat)),
        settings(std::make_unique<AppSettings>(*ini)) {
    settings->setDataFolder(dir.path());
  }
  std::string databasePath() const { return dir.filePath("moechat.db").toStdString(); }
};

// The app without its window, as the desktop program assembles it (ChatApp) over
// a data folder of its own.
struct HeadlessApp : TestDataFolder {
  std::optional<AppDatabase> db;
  std::unique_ptr<ChatApp> parts;
  ConversationStore* store = nullptr;
  EngineHost* engine = nullptr;
  ChatController* chat = nullptr;

  explicit HeadlessApp(std::unique_ptr<ChatEngine> e) { open(std::move(e)); }
  ~HeadlessApp() { close(); }

  // What quitting does, in the desktop program's order: the controller (a streaming
  // reply is saved as stopped), then the engine thread, then the store. The database
  // stays open, for the test to read what was saved.
  void quit() {
    store = nullptr;
    engine = nullptr;
    chat = nullptr;
    parts.reset();
  }

 protected:
  void open(std::unique_ptr<ChatEngine> e) {
    db.emplace(AppDatabase::open(databasePath()));
    parts = std::make_unique<ChatApp>(*db, *settings, std::move(e));
    store = &parts->store();
    engine = &parts->engine();
    chat = &parts->chat();
  }
  void close() {
    quit();
    db.reset();
  }
};

// The whole app: HeadlessApp and the main window, shown offscreen.
struct GuiApp : HeadlessApp {
  std::unique_ptr<MainWindow> window;

  explicit GuiApp(std::unique_ptr<ChatEngine> e) : HeadlessApp(std::move(e)) { openWindow(); }
  ~GuiApp() { window.reset(); }

  void quit() {
    window.reset();
    HeadlessApp::quit();
  }

  // The app closed and started again on the same data folder: what it shows comes
  // from the database file alone. No model is loaded after it.
  void reopen(std::unique_ptr<ChatEngine> e) {
    window.reset();
    close();
    open(std::move(e));
    openWindow();
  }

  // Loads the demo model (the scripted engine ignores the file) and waits for it.
  bool loadDemo(int timeout_ms = 60000) {
    window->loadModel({"Demo model", QString(), QString()});
    QDeadlineTimer deadline(timeout_ms);
    while (!chat->modelReady() && !deadline.hasExpired()) QTest::qWait(10);
    return chat->modelReady();
  }

 private:
  void openWindow() {
    window = std::make_unique<MainWindow>(*settings, *store, *chat, *engine);
    window->show();
  }
};

}  // namespace moe::test
