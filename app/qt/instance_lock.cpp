#include "app/qt/instance_lock.h"

#include <QDir>

namespace moe {

InstanceLock lockDataFolder(const QString& data_folder) {
  InstanceLock out;
  QDir().mkpath(data_folder);
  auto lock = std::make_unique<QLockFile>(QDir(data_folder).filePath("moechat.lock"));
  lock->setStaleLockTime(0);  // a lock whose process is gone is stale, however recent
  if (lock->tryLock(0)) {
    out.lock = std::move(lock);
    return out;
  }
  qint64 pid = 0;
  QString host, app;
  if (lock->error() == QLockFile::LockFailedError && lock->getLockInfo(&pid, &host, &app))
    out.error = QStringLiteral(
                    "moechat is already running with the chats in %1 (process %2). Switch to that "
                    "window, or quit it first.")
                    .arg(data_folder)
                    .arg(pid);
  else
    out.error = QStringLiteral("cannot lock the data folder %1 (is it writable?)").arg(data_folder);
  return out;
}

}  // namespace moe
