// GPU faults as the app's user meets them: the real engine on the CUDA stand-in
// (MOECHAT_CUDA_LIBRARY names it), the real window and a real database. A kernel or
// copy fault in the middle of a reply stops it: the text that had streamed is stored
// with the reason, the window says why, the model goes on on the CPU, and the next
// message is answered there. A fault while the model loads is reported, and nothing
// stored changes.
#include <QApplication>
#include <QLabel>
#include <QMessageBox>
#include <QSignalSpy>
#include <QTest>
#include <QTimer>

#include "app/core/local_chat_engine.h"
#include "inference/backend_factory.h"
#include "support/gui_fixture.h"
#include "ui/chat_view.h"
#include "ui/composer.h"

// Last: the stand-in's runtime header defines the CUDA keywords as macros.
#include "cuda_standin.h"

using namespace moe;

namespace {

void send(test::GuiApp& app, const QString& text) {
  auto* edit = app.window->composer()->editor();
  QTest::keyClicks(edit, text);
  QTest::keyClick(edit, Qt::Key_Return);
}

// Sends text and waits for its reply to end (complete, stopped or failed: the
// controller saves it, then says so); true when the chat then holds messages_after.
bool sendAndWait(test::GuiApp& app, const QString& text, size_t messages_after) {
  QSignalSpy finished(app.chat, &ChatController::replyFinished);
  send(app, text);
  if (finished.isEmpty() && !finished.wait(120000)) return false;
  return app.chat->current() != 0 && app.store->messages(app.chat->current()).size() == messages_after;
}

}  // namespace

class CudaGuiFaultsTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    std::string why;
    if (!cudaDeviceAvailable(&why)) QSKIP(("no CUDA device: " + why).c_str());
  }

  void cleanup() { cudastandin::recover(); }

  void faultMidReplyKeepsTheTextAndMovesToTheCpu_data() {
    QTest::addColumn<QString>("kind");
    QTest::newRow("kernel") << "kernel";
    QTest::newRow("copy") << "copy";
  }
  void faultMidReplyKeepsTheTextAndMovesToTheCpu() {
    QFETCH(QString, kind);
    test::GuiApp app(std::make_unique<LocalChatEngine>());
    app.settings->setCachePolicy("proactive");
    SamplingDefaults s = app.settings->sampling();
    s.max_tokens = 24;
    s.temperature = 0;
    app.settings->setSampling(s);
    QVERIFY(app.loadDemo());
    QVERIFY(QString::fromStdString(app.chat->model()->backend).startsWith("cuda"));

    QVERIFY(sendAndWait(app, "Hello", 2));
    const qint64 conversation = app.chat->current();
    QCOMPARE(app.store->messages(conversation)[1].state, MessageState::Complete);

    // The second reply faults at the device's next kernel or copy once its first text
    // has arrived (every decode step launches kernels and reads its result back), so
    // the fault falls mid-reply whatever the prediction thread's timing does to the
    // amount of device work.
    bool armed = false;
    const auto arm = connect(app.chat, &ChatController::replyText, [&] {
      if (armed) return;
      armed = true;
      if (kind == "kernel")
        cudastandin::failKernelAt(1);
      else
        cudastandin::failCopyAt(1);
    });
    // The engine reports the failed reply, then the model it reloaded on the CPU.
    QSignalSpy reloaded(app.chat, &ChatController::modelLoaded);
    QVERIFY(sendAndWait(app, "Hello", 4));
    disconnect(arm);
    QVERIFY(armed);
    QVERIFY(!reloaded.isEmpty() || reloaded.wait(60000));
    auto msgs = app.store->messages(conversation);
    const Message failed = msgs[3];
    QCOMPARE(failed.state, MessageState::Error);
    QVERIFY2(failed.stats.stop_reason.find("GPU error") != std::string::npos,
             failed.stats.stop_reason.c_str());
    QVERIFY2(failed.stats.stop_reason.find("now runs on the CPU") != std::string::npos,
             failed.stats.stop_reason.c_str());
    // What streamed before the fault is what is stored, and what the window shows.
    QVERIFY(!failed.text.empty());
    QCOMPARE(app.window->chatView()->bubble(3)->item().text, QString::fromStdString(failed.text));
    // The reason stays on screen (a notice bar) past the CPU model's load message.
    QVERIFY(app.window->noticeBar()->isVisible());
    const QString notice = app.window->noticeBar()->findChild<QLabel*>("noticeText")->text();
    QVERIFY2(notice.contains("GPU error") && notice.contains("now runs on the CPU"), qPrintable(notice));
    QVERIFY(QString::fromStdString(app.chat->model()->backend).startsWith("cpu"));

    // The chat goes on, on the CPU; the earlier messages are untouched.
    QVERIFY(sendAndWait(app, "Are you still there?", 6));
    msgs = app.store->messages(conversation);
    QCOMPARE(msgs[5].state, MessageState::Complete);
    QVERIFY(!msgs[5].text.empty());
    QCOMPARE(msgs[3].text, failed.text);
    QCOMPARE(msgs[1].state, MessageState::Complete);
  }

  // A device allocation that fails while the model loads: the load is refused with
  // the reason (in a message box), no model is loaded, the stored chats are as before.
  void faultWhileLoadingIsReportedAndChangesNothing() {
    test::GuiApp app(std::make_unique<LocalChatEngine>());
    const qint64 kept = app.store->createConversation("Kept");
    app.store->addMessage(kept, Role::User, "stored before");
    cudastandin::failMallocAt(3);
    QString box_text;
    QTimer closer;
    connect(&closer, &QTimer::timeout, [&] {
      if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
        box_text = box->text();
        box->accept();
      }
    });
    closer.start(20);
    app.window->loadModel({"Demo model", QString(), QString()});
    QTRY_VERIFY_WITH_TIMEOUT(!box_text.isEmpty(), 60000);
    QVERIFY2(box_text.contains("out of memory") || box_text.contains("cudaMalloc"), qPrintable(box_text));
    QVERIFY(!app.chat->modelReady());
    const auto msgs = app.store->messages(kept);
    QCOMPARE(msgs.size(), size_t(1));
    QCOMPARE(msgs[0].text, std::string("stored before"));
  }
};

QTEST_MAIN(CudaGuiFaultsTest)
#include "test_cuda_gui_faults.moc"
