// Chats survive a kill: a child process (helpers/persist_writer) writes a
// conversation the way the app does and reports each commit on stdout; the test
// SIGKILLs it at several points (after k finished messages, mid-stream) and then
// opens the database: it must be intact, hold every message the child reported
// with its exact text, and turn the cut-off reply into 'interrupted' with at
// least the text of the last reported checkpoint. A second child
// (helpers/chat_writer) runs the app's ChatController on the scripted engine:
// killed once a reply has been shown ten times, or during a regenerate, it must keep what
// the window had shown and the earlier complete reply.
#include <QtTest>

#include <QDeadlineTimer>
#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QStandardPaths>
#include <QTemporaryDir>

#include <map>

#include "app/core/app_database.h"
#include "app/core/conversation_store.h"

using moe::AppDatabase;
using moe::ConversationStore;
using moe::Message;
using moe::MessageState;

namespace {

// What the child said it committed before it died.
struct Reported {
  int64_t conversation = 0;
  struct Finished {
    int64_t id;
    std::string role, text;
  };
  std::vector<Finished> finished;
  int64_t reply = 0;
  std::string reply_text;  // all reported checkpoint chunks
  int checkpoints = 0;
  // The write under way when the child died (announced, not confirmed).
  std::string pending_role, pending_text, pending_chunk;
};

std::string unhex(const QByteArray& h) { return QByteArray::fromHex(h).toStdString(); }

// Parses one line; returns false for a line it does not understand.
bool parseLine(const QByteArray& raw, Reported& r) {
  const QList<QByteArray> f = raw.trimmed().split(' ');
  if (f.size() == 2 && f[0] == "conv") {
    r.conversation = f[1].toLongLong();
  } else if (f.size() == 3 && f[0] == "pending") {
    r.pending_role = f[1].toStdString();
    r.pending_text = unhex(f[2]);
  } else if (f.size() == 4 && f[0] == "msg") {
    r.finished.push_back({f[1].toLongLong(), f[2].toStdString(), unhex(f[3])});
    r.pending_role.clear();
    r.pending_text.clear();
  } else if (f.size() == 2 && f[0] == "reply") {
    r.reply = f[1].toLongLong();
  } else if (f.size() == 2 && f[0] == "pending-ckpt") {
    r.pending_chunk = unhex(f[1]);
  } else if (f.size() == 3 && f[0] == "ckpt") {
    r.reply_text += unhex(f[2]);
    r.pending_chunk.clear();
    ++r.checkpoints;
  } else {
    return false;
  }
  return true;
}

}  // namespace

namespace {

// What chat_writer said before it died.
struct Shown {
  int64_t conversation = 0, streaming = 0;
  std::map<int64_t, QString> complete;  // finished replies
  QString first, last;                  // texts shown for the streaming reply
  int updates = 0;                      // how often the window was given the streaming reply's text
};

bool parseChatLine(const QByteArray& raw, Shown& s) {
  const QList<QByteArray> f = raw.trimmed().split(' ');
  const auto text = [&](int i) { return QString::fromUtf8(QByteArray::fromHex(f.value(i))); };
  if (f.size() == 2 && f[0] == "conv") {
    s.conversation = f[1].toLongLong();
  } else if (f.size() == 2 && f[0] == "streaming") {
    s.streaming = f[1].toLongLong();
  } else if (f.size() == 3 && f[0] == "complete") {
    s.complete[f[1].toLongLong()] = text(2);
  } else if (f.size() == 3 && f[0] == "shown") {
    if (f[1].toLongLong() != s.streaming) return true;
    if (s.first.isEmpty()) s.first = text(2);
    s.last = text(2);
    ++s.updates;
  } else {
    return false;
  }
  return true;
}

QString q(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

class PersistKillTest : public QObject {
  Q_OBJECT
 private slots:
  // A kill of the process cannot tell a commit on disk from one in the OS's cache: a
  // power cut can. Every connection the app opens runs WAL with synchronous = FULL,
  // and every commit the writer reports (a chat, a message, a reply's checkpoint) was
  // synced (fsync or fdatasync, counted by strace) before the report left the process.
  void everyReportedCommitIsSyncedFirst() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString db_path = dir.filePath("moechat.db");
    {
      AppDatabase adb = AppDatabase::open(db_path.toStdString());       // every connection of the app's
      QCOMPARE(adb.db().queryInt64("PRAGMA synchronous"), int64_t(2));  // FULL
      QCOMPARE(adb.journalMode(), std::string("wal"));
    }
    const QString strace = QStandardPaths::findExecutable("strace");
    QVERIFY2(!strace.isEmpty(), "strace is missing (tools/install-deps.sh installs it)");
    const QString log = dir.filePath("syscalls.log");
    QProcess child;
    // LeakSanitizer cannot run under ptrace (the ASan build's writer would exit 1 at its
    // end): its leaks are checked in the other cases.
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    const QString asan = env.value("ASAN_OPTIONS");
    env.insert("ASAN_OPTIONS", (asan.isEmpty() ? QString() : asan + ":") + "detect_leaks=0");
    child.setProcessEnvironment(env);
    child.start(strace, {"-f", "-qq", "-e", "trace=fsync,fdatasync,write", "-o", log,
                         QString(MOECHAT_TEST_HELPERS) + "/persist_writer", dir.filePath("synced.db"), "8",
                         "0", "5"});
    QVERIFY2(child.waitForFinished(120000), qPrintable(child.errorString()));
    QCOMPARE(child.exitCode(), 3);  // the writer's end after its checkpoints
    QFile f(log);
    QVERIFY(f.open(QIODevice::ReadOnly));
    int syncs = 0, reports = 0;
    QStringList unsynced;
    for (const QByteArray& line : f.readAll().split('\n')) {
      if (line.contains(" fsync(") || line.contains(" fdatasync(")) {
        QVERIFY2(line.trimmed().endsWith("= 0"), line.constData());
        ++syncs;
        continue;
      }
      const int at = line.indexOf(" write(1, \"");
      if (at < 0) continue;
      const QByteArray what = line.mid(at + 11, 5);
      if (!what.startsWith("conv ") && !what.startsWith("msg ") && !what.startsWith("reply") &&
          !what.startsWith("ckpt "))
        continue;  // "pending": announced before the write
      ++reports;
      if (syncs == 0) unsynced << QString::fromUtf8(line);
      syncs = 0;
    }
    QCOMPARE(reports, 1 + 8 + 1 + 5);  // the chat, 8 messages, the reply, 5 checkpoints
    QVERIFY2(unsynced.isEmpty(), qPrintable("reported before a sync: " + unsynced.join('\n')));
  }

  void killedWriterLosesNothingReported_data() {
    QTest::addColumn<int>("messages");
    QTest::addColumn<int>("afterMsgs");
    QTest::addColumn<int>("afterCkpts");
    QTest::addColumn<int>("chunkBytes");
    QTest::newRow("right after the conversation") << 40 << 0 << -1 << 0;
    QTest::newRow("after 1 message") << 40 << 1 << -1 << 0;
    QTest::newRow("after 7 messages") << 40 << 7 << -1 << 0;
    QTest::newRow("after 150 of 300 messages") << 300 << 150 << -1 << 0;
    QTest::newRow("stream, 1 checkpoint") << 6 << -1 << 1 << 0;
    QTest::newRow("stream, 40 checkpoints") << 6 << -1 << 40 << 0;
    QTest::newRow("stream, 400 checkpoints") << 20 << -1 << 400 << 0;
    // Checkpoints of 1 MB more each time: the kill lands inside a multi-megabyte transaction.
    QTest::newRow("stream, big checkpoints") << 4 << -1 << 3 << (1 << 20);
  }

  void killedWriterLosesNothingReported() {
    QFETCH(int, messages);
    QFETCH(int, afterMsgs);
    QFETCH(int, afterCkpts);
    QFETCH(int, chunkBytes);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString db_path = dir.filePath("moechat.db");

    QProcess child;
    child.setProcessChannelMode(QProcess::SeparateChannels);
    child.start(QString(MOECHAT_TEST_HELPERS) + "/persist_writer",
                {db_path, QString::number(messages), QString::number(chunkBytes)});
    QVERIFY2(child.waitForStarted(10000), qPrintable(child.errorString()));

    Reported rep;
    bool killed = false;
    auto drain = [&] {
      while (child.canReadLine()) {
        const QByteArray line = child.readLine();
        QVERIFY2(parseLine(line, rep), line.constData());
      }
    };
    while (!killed) {
      if (!child.waitForReadyRead(30000)) break;  // the child ended or stalled: reported below
      drain();
      const bool msgs_reached =
          afterMsgs >= 0 && rep.conversation != 0 && int(rep.finished.size()) >= afterMsgs;
      const bool ckpts_reached = afterCkpts >= 0 && rep.checkpoints >= afterCkpts;
      if (msgs_reached || ckpts_reached) {
        child.kill();  // SIGKILL: no destructor, no atexit, no sqlite3_close
        killed = true;
      }
    }
    QVERIFY2(killed, qPrintable("child ended before the kill point: " + child.readAllStandardError()));
    QVERIFY(child.waitForFinished(10000));
    QCOMPARE(child.exitStatus(), QProcess::CrashExit);
    drain();  // lines written before the kill but read after it count as reported too
    QVERIFY(rep.conversation != 0);
    if (afterCkpts >= 0) QVERIFY(rep.checkpoints >= afterCkpts);

    // Reopen as the app does at start.
    AppDatabase adb = AppDatabase::open(db_path.toStdString());
    QCOMPARE(adb.integrityCheck(), std::string("ok"));
    QCOMPARE(adb.foreignKeyViolations(), int64_t(0));
    adb.db().exec("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)");
    ConversationStore store(adb);
    const int64_t recovered = store.recoverInterrupted();
    QVERIFY(recovered <= 1);

    auto conv = store.get(rep.conversation);
    QVERIFY(conv.has_value());
    QCOMPARE(conv->title, std::string("kill test"));
    const auto msgs = store.messages(rep.conversation);
    std::map<int64_t, moe::Message> by_id;
    for (const auto& m : msgs) by_id[m.id] = m;

    qInfo(
        "killed after %zu reported messages and %d checkpoints; the file holds %zu messages, reply %zu bytes",
        rep.finished.size(), rep.checkpoints, msgs.size(),
        rep.reply && by_id.count(rep.reply) ? by_id[rep.reply].text.size() : size_t(0));
    // Every reported message is there, complete, with its exact text, in order.
    QVERIFY(msgs.size() >= rep.finished.size());
    for (size_t i = 0; i < rep.finished.size(); ++i) {
      const auto& want = rep.finished[i];
      QVERIFY2(by_id.count(want.id), qPrintable(QString("reported message %1 is missing").arg(want.id)));
      const auto& got = by_id[want.id];
      QCOMPARE(got.text, want.text);
      QCOMPARE(std::string(moe::toString(got.role)), want.role);
      QCOMPARE(got.state, MessageState::Complete);
      QCOMPARE(got.position, int64_t(i));
    }
    // Beyond the reported ones there is at most the write under way, and never a part of one:
    // a transaction is all there or not at all.
    for (const auto& m : msgs) QVERIFY(m.state != MessageState::Streaming);
    QVERIFY(msgs.size() <= rep.finished.size() + 1);
    if (rep.reply != 0) {
      // The stream: 'interrupted', with the text of the last reported checkpoint or of the one under way.
      QCOMPARE(recovered, int64_t(1));
      QCOMPARE(msgs.size(), rep.finished.size() + 1);
      const auto& reply = msgs.back();
      QCOMPARE(reply.id, rep.reply);
      QCOMPARE(reply.state, MessageState::Interrupted);
      const bool at_reported = reply.text == rep.reply_text;
      const bool at_pending = !rep.pending_chunk.empty() && reply.text == rep.reply_text + rep.pending_chunk;
      QVERIFY2(at_reported || at_pending,
               qPrintable(QString("reply has %1 bytes, reported %2 (+%3 under way)")
                              .arg(reply.text.size())
                              .arg(rep.reply_text.size())
                              .arg(rep.pending_chunk.size())));
    } else if (msgs.size() > rep.finished.size()) {
      // Committed before the child could say so: the announced message, whole; or a reply begun
      // (an assistant message's first transaction, or the stream's) and cut before any text.
      const auto& extra = msgs.back();
      if (extra.state == MessageState::Complete) {
        QCOMPARE(extra.text, rep.pending_text);
        QCOMPARE(std::string(moe::toString(extra.role)), rep.pending_role);
      } else {
        QCOMPARE(extra.state, MessageState::Interrupted);
        QCOMPARE(extra.role, moe::Role::Assistant);
        QCOMPARE(extra.text, std::string());
        QCOMPARE(recovered, int64_t(1));
      }
    } else {
      QCOMPARE(recovered, int64_t(0));
    }
    // The database keeps working after the crash.
    const int64_t after = store.addMessage(rep.conversation, moe::Role::User, "after the crash");
    QCOMPARE(store.message(after)->position, int64_t(msgs.size()));
    QCOMPARE(adb.integrityCheck(), std::string("ok"));
  }

  void killedMidReplyKeepsWhatWasShown_data() {
    QTest::addColumn<QString>("mode");
    QTest::newRow("10 updates into a reply") << "reply";
    QTest::newRow("10 updates into a regenerate") << "regenerate";
  }
  void killedMidReplyKeepsWhatWasShown() {
    QFETCH(QString, mode);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString db_path = dir.filePath("moechat.db");
    QProcess child;
    child.setProcessChannelMode(QProcess::SeparateChannels);
    child.start(QString(MOECHAT_TEST_HELPERS) + "/chat_writer", {db_path, mode});
    QVERIFY2(child.waitForStarted(10000), qPrintable(child.errorString()));

    Shown shown;
    auto drain = [&] {
      while (child.canReadLine()) {
        const QByteArray line = child.readLine();
        QVERIFY2(parseChatLine(line, shown), line.constData());
      }
    };
    // Killed on an event, not after a time: once the window was given the reply's text 10
    // times (several checkpoints written by then on any machine: the first at once, then
    // every quarter second or 400 characters). A guard ends a child that never gets there.
    QDeadlineTimer give_up(120000);
    while (!give_up.hasExpired() && child.state() == QProcess::Running && shown.updates < 10) {
      child.waitForReadyRead(50);
      drain();
    }
    QVERIFY2(shown.updates >= 10 && child.state() == QProcess::Running,
             qPrintable("the child ended before the kill: " + child.readAllStandardError()));
    child.kill();  // SIGKILL: no destructor, no final save
    QVERIFY(child.waitForFinished(10000));
    QCOMPARE(child.exitStatus(), QProcess::CrashExit);
    drain();

    AppDatabase adb = AppDatabase::open(db_path.toStdString());
    QCOMPARE(adb.integrityCheck(), std::string("ok"));
    adb.db().exec("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)");
    ConversationStore store(adb);
    QCOMPARE(store.recoverInterrupted(), int64_t(1));
    const auto reply = store.message(shown.streaming);
    QVERIFY(reply.has_value());
    QCOMPARE(reply->state, MessageState::Interrupted);
    // What the window showed is kept: the first words at least, and nothing it did not show
    // beyond the text being saved when the kill came.
    const QString kept = q(reply->text);
    qInfo("kept %lld of %lld characters shown", qlonglong(kept.size()), qlonglong(shown.last.size()));
    QVERIFY2(kept.startsWith(shown.first),
             qPrintable(QString("kept %1 characters, the first text shown had %2")
                            .arg(kept.size())
                            .arg(shown.first.size())));
    QVERIFY(shown.last.startsWith(kept) || kept.startsWith(shown.last));

    const auto msgs = store.messages(shown.conversation);
    QCOMPARE(msgs.size(), size_t(2));
    QCOMPARE(q(msgs[0].text), QString("Tell me something"));
    if (mode == "reply") {
      QCOMPARE(msgs[1].id, shown.streaming);
      return;
    }
    // The regenerate: the earlier complete reply is intact and still the one shown; the cut-off
    // one is kept beside it.
    QCOMPARE(shown.complete.size(), size_t(1));
    const auto& [earlier_id, earlier_text] = *shown.complete.begin();
    QCOMPARE(msgs[1].id, earlier_id);
    QCOMPARE(q(msgs[1].text), earlier_text);
    QCOMPARE(msgs[1].state, MessageState::Complete);
    QCOMPARE(msgs[1].alternatives, 2);
    const std::vector<Message> turn = store.alternatives(earlier_id);
    QCOMPARE(turn.size(), size_t(2));
    QCOMPARE(turn[1].id, shown.streaming);
    QVERIFY(!turn[1].shown);
  }
};

QTEST_GUILESS_MAIN(PersistKillTest)
#include "test_persist_kill.moc"
