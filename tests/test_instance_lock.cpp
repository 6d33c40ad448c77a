// One moechat per data folder: a second lock on the same folder is refused with the
// holder's process id; a lock left by a process that died (a crash, a kill) is taken
// over; releasing the first lets the next one in.
#include <sys/wait.h>
#include <unistd.h>
#include <QCoreApplication>
#include <QTemporaryDir>
#include <QtTest>

#include "app/qt/instance_lock.h"

using namespace moe;

class InstanceLockTest : public QObject {
  Q_OBJECT

 private slots:
  void secondInstanceIsRefusedWithThePid() {
    QTemporaryDir dir;
    InstanceLock first = lockDataFolder(dir.path());
    QVERIFY2(first.lock, qPrintable(first.error));
    const InstanceLock second = lockDataFolder(dir.path());
    QVERIFY(!second.lock);
    QVERIFY2(second.error.contains("already running") &&
                 second.error.contains(QString::number(QCoreApplication::applicationPid())),
             qPrintable(second.error));
    first.lock.reset();  // the first instance quits
    const InstanceLock third = lockDataFolder(dir.path());
    QVERIFY2(third.lock, qPrintable(third.error));
  }

  void lockOfADeadProcessIsTakenOver() {
    QTemporaryDir dir;
    const pid_t child = fork();
    QVERIFY(child >= 0);
    if (child == 0) {  // takes the lock and dies without releasing it (as a crash would)
      InstanceLock held = lockDataFolder(dir.path());
      _exit(held.lock ? 0 : 1);
    }
    int status = 0;
    QCOMPARE(waitpid(child, &status, 0), child);
    QVERIFY(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    QVERIFY(QFile::exists(dir.filePath("moechat.lock")));
    const InstanceLock next = lockDataFolder(dir.path());
    QVERIFY2(next.lock, qPrintable(next.error));
  }
};

QTEST_GUILESS_MAIN(InstanceLockTest)
#include "test_instance_lock.moc"
