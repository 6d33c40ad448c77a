// Child process for test_persist_kill: the app's ChatController, with its
// checkpoints and its regenerate, writing a chat answered by the scripted
// engine (tests/support/fake_chat_engine.h), and reporting on stdout what the window
// was given to show, so the test can SIGKILL it mid-reply and compare the
// database with what the user saw.
//
//   chat_writer <db> reply        sends a message; the reply streams for seconds
//   chat_writer <db> regenerate   sends a message, the short reply completes, then
//                                 regenerates it with a reply that streams for seconds
// stdout (texts hex-encoded):
//   conv <id>                     the conversation was created
//   complete <id> <hex text>      a reply was finished and saved
//   streaming <id>                the reply the test kills was begun
//   shown <id> <hex text>         the text the window was given for reply <id>
#include <QCoreApplication>
#include <QSettings>
#include <QTimer>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "app/core/app_database.h"
#include "app/core/conversation_store.h"
#include "app/qt/app_settings.h"
#include "app/qt/chat_controller.h"
#include "app/qt/inference_worker.h"
#include "support/fake_chat_engine.h"

namespace {

void report(const QByteArray& line) {
  std::fputs((line + "\n").constData(), stdout);
  std::fflush(stdout);
}

QByteArray hex(const QString& s) { return s.toUtf8().toHex(); }

// A reply of several seconds: a word every 2 ms, with multi-byte characters.
void streamLong(moe::test::FakeChatEngine& e) {
  e.words.clear();
  for (int i = 0; i < 5000; ++i) e.words.push_back(" w" + std::to_string(i) + (i % 7 ? "" : " \xC3\xA9"));
  e.per_token = std::chrono::milliseconds(2);
}

}  // namespace

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  if (argc != 3 || (std::string(argv[2]) != "reply" && std::string(argv[2]) != "regenerate")) {
    std::fprintf(stderr, "usage: chat_writer <db> reply|regenerate\n");
    return 2;
  }
  const bool regenerate = std::string(argv[2]) == "regenerate";
  try {
    moe::AppDatabase db = moe::AppDatabase::open(argv[1]);
    moe::ConversationStore store(db);
    QSettings ini(QString::fromLocal8Bit(argv[1]) + ".ini", QSettings::IniFormat);
    moe::AppSettings settings(ini);
    auto engine = std::make_unique<moe::test::FakeChatEngine>();
    auto* fake = engine.get();
    if (regenerate)
      fake->words = {"The first", " reply, \xE2\x9C\x93", " complete."};
    else
      streamLong(*fake);
    moe::EngineHost host(std::move(engine));
    moe::ChatController chat(store, host, settings);

    QObject::connect(&chat, &moe::ChatController::replyText, [](qint64 id, const QString& text) {
      report("shown " + QByteArray::number(id) + " " + hex(text));
    });
    bool regenerated = false;
    QObject::connect(&chat, &moe::ChatController::replyFinished, [&](const moe::Message& m) {
      report("complete " + QByteArray::number(m.id) + " " + hex(QString::fromStdString(m.text)));
      if (!regenerate || std::exchange(regenerated, true)) return;
      QTimer::singleShot(0, [&] {  // as a click would, once the finished reply is settled
        streamLong(*fake);
        if (!chat.regenerate()) QCoreApplication::exit(4);
        report("streaming " + QByteArray::number(chat.streamingReply()));
      });
    });
    QObject::connect(&chat, &moe::ChatController::modelLoaded, [&] {
      if (!chat.send("Tell me something")) QCoreApplication::exit(3);
      report("conv " + QByteArray::number(chat.current()));
      if (!regenerate) report("streaming " + QByteArray::number(chat.streamingReply()));
    });
    moe::EngineLoadOptions opts;
    opts.demo = true;
    chat.loadModel(opts);
    QTimer::singleShot(60000, [] { QCoreApplication::exit(5); });  // the test failed to kill it
    return app.exec();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chat_writer: %s\n", e.what());
    return 1;
  }
}
