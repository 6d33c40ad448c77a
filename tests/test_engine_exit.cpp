// Quitting with a model loaded: the reply in progress is stopped and saved, the
// engine thread is joined (the reply's call has returned), and the engine itself
// (with a real model, gigabytes of weights) is left for the operating system to
// reclaim when the process exits, instead of being freed piece by piece while
// the process lingers. Without leaveEngineToExit() the engine is destroyed as
// before (the control case).
#include <QSignalSpy>
#include <QtTest>
#include <atomic>
#include <memory>

#include "app/core/conversation_store.h"
#include "app/qt/chat_controller.h"
#include "support/fake_chat_engine.h"
#include "support/gui_fixture.h"

using namespace moe;

namespace {

struct Watch {
  std::atomic<bool> destroyed{false};
  std::atomic<bool> reply_returned{false};
  ChatEngine* engine = nullptr;
};

// A scripted engine that says when it is destroyed and when a reply() returns.
class WatchedEngine final : public ChatEngine {
 public:
  explicit WatchedEngine(Watch& w) : watch_(w) {
    inner_.per_token = std::chrono::milliseconds(20);
    inner_.words.assign(2000, " word");
    watch_.engine = this;
  }
  ~WatchedEngine() override { watch_.destroyed = true; }
  LoadedModelInfo load(const EngineLoadOptions& o, const LoadProgress& p) override {
    return inner_.load(o, p);
  }
  bool loaded() const override { return inner_.loaded(); }
  EngineReplyStats reply(const std::vector<ChatMessage>& m, const GenerationParams& g, const TextSink& s,
                         const std::atomic<bool>& cancel) override {
    const EngineReplyStats st = inner_.reply(m, g, s, cancel);
    watch_.reply_returned = true;
    return st;
  }
  EngineCounters counters() const override { return inner_.counters(); }
  ExpertResidency residency() const override { return inner_.residency(); }

 private:
  Watch& watch_;
  test::FakeChatEngine inner_;
};

struct App : test::HeadlessApp {
  explicit App(Watch& w) : HeadlessApp(std::make_unique<WatchedEngine>(w)) {}

  // Loads, sends a message and waits until some of the reply has streamed.
  bool streaming() {
    QSignalSpy loaded(chat, &ChatController::modelLoaded);
    EngineLoadOptions o;
    o.demo = true;
    chat->loadModel(o);
    if (!loaded.wait(10000)) return false;
    if (!chat->send("tell me everything")) return false;
    QSignalSpy text(chat, &ChatController::replyText);
    return text.wait(10000);
  }

  // What quitting does, in main()'s order: the controller saves, then the host goes.
  void quit(bool leave_engine) {
    if (leave_engine) engine->leaveEngineToExit();
    const qint64 conversation = chat->current();
    HeadlessApp::quit();
    last = ConversationStore(*db).messages(conversation);
  }
  std::vector<Message> last;
};

}  // namespace

class EngineExitTest : public QObject {
  Q_OBJECT

 private slots:
  void quitLeavesTheEngineToTheOsAfterSavingTheReply() {
    Watch w;
    {
      App app(w);
      QVERIFY(app.streaming());
      app.quit(true);
      QVERIFY(w.reply_returned);  // the thread was joined after the reply stopped
      QVERIFY(!w.destroyed);      // the model's memory is left to the exit
      QCOMPARE(int(app.last.size()), 2);
      QCOMPARE(app.last.back().state, MessageState::Stopped);
      QVERIFY(!app.last.back().text.empty());  // what streamed is kept
    }
    delete w.engine;  // what the operating system would do at exit; keeps leak checkers quiet
    QVERIFY(w.destroyed);
  }

  void withoutItTheEngineIsFreedAsBefore() {
    Watch w;
    App app(w);
    QVERIFY(app.streaming());
    app.quit(false);
    QVERIFY(w.reply_returned);
    QVERIFY(w.destroyed);
    QCOMPARE(app.last.back().state, MessageState::Stopped);
  }
};

QTEST_MAIN(EngineExitTest)
#include "test_engine_exit.moc"
