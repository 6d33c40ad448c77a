// Size and SHA-256 of a file, streamed in blocks (a 20 GB model never sits in
// memory), run off the GUI thread: hashFileAsync() hashes on a QThread of its own
// and delivers the result to a receiver on the receiver's thread.
#pragma once

#include <QByteArray>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QThread>
#include <atomic>
#include <functional>
#include <memory>

namespace moe {

struct FileHashResult {
  bool ok = false;  // false: the file could not be read (error says why) or hashing was cancelled
  QString error;
  qint64 size = 0;  // bytes read
  QString sha256;   // lower-case hex
};

// Hashes `path` on the calling thread. `cancel` (optional) is polled between blocks.
FileHashResult hashFile(const QString& path, const std::atomic<bool>* cancel = nullptr);

// Lower-case hex digest of a byte array (tests, small files).
QString sha256Hex(const QByteArray& bytes);

// Hashes `path` on a new thread; `done` runs on `receiver`'s thread. The thread
// deletes itself when it ends. The receiver must not be destroyed while the
// thread runs: its destructor calls cancelAndWait(), which stops the hash early.
class HashJob {
 public:
  HashJob() = default;
  HashJob(std::shared_ptr<std::atomic<bool>> cancel, QThread* thread);
  void cancelAndWait();

 private:
  std::shared_ptr<std::atomic<bool>> cancel_;
  QPointer<QThread> thread_;
};
// `then` (optional) runs on the worker thread after a successful hash (more
// checks of the same file, e.g. reading its header).
HashJob hashFileAsync(const QString& path, QObject* receiver, std::function<void(FileHashResult)> done,
                      std::function<void()> then = {});

}  // namespace moe
