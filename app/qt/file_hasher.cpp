#include "app/qt/file_hasher.h"

#include <QFile>
#include <QFileInfo>

#include "models/sha256.h"

namespace moe {

namespace {
constexpr qint64 kBlockBytes = 4 << 20;  // large enough to keep the disk streaming
}

FileHashResult hashFile(const QString& path, const std::atomic<bool>* cancel) {
  FileHashResult r;
  QFile f(path);
  // A FIFO or device would block the open or never end; only regular files are hashed.
  if (const QFileInfo info(path); info.exists() && !info.isFile()) {
    r.error = QStringLiteral("cannot read %1: not a regular file").arg(path);
    return r;
  }
  if (!f.open(QIODevice::ReadOnly)) {
    r.error = QStringLiteral("cannot read %1: %2").arg(path, f.errorString());
    return r;
  }
  Sha256 h;
  QByteArray block;
  while (!f.atEnd()) {
    if (cancel && cancel->load()) {
      r.error = QStringLiteral("cancelled");
      return r;
    }
    block = f.read(kBlockBytes);
    if (block.isEmpty() && f.error() != QFileDevice::NoError) {
      r.error = QStringLiteral("read error in %1: %2").arg(path, f.errorString());
      return r;
    }
    h.update(std::span(reinterpret_cast<const uint8_t*>(block.constData()), size_t(block.size())));
    r.size += block.size();
  }
  r.sha256 = QString::fromStdString(h.hexDigest());
  r.ok = true;
  return r;
}

QString sha256Hex(const QByteArray& bytes) {
  const std::span<const uint8_t> data(reinterpret_cast<const uint8_t*>(bytes.constData()),
                                      size_t(bytes.size()));
  return QString::fromStdString(sha256Hex(data));
}

HashJob::HashJob(std::shared_ptr<std::atomic<bool>> cancel, QThread* thread)
    : cancel_(std::move(cancel)), thread_(thread) {}

void HashJob::cancelAndWait() {
  if (cancel_) cancel_->store(true);
  if (thread_) thread_->wait();
}

HashJob hashFileAsync(const QString& path, QObject* receiver, std::function<void(FileHashResult)> done,
                      std::function<void()> then) {
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  QThread* t = QThread::create([path, cancel, receiver, done = std::move(done), then = std::move(then)] {
    FileHashResult r = hashFile(path, cancel.get());
    if (r.ok && then) then();
    // Queued onto the receiver's thread; Qt drops the call if the receiver is
    // deleted before it runs (the owner waits for this thread before it goes).
    QMetaObject::invokeMethod(
        receiver, [done, r] { done(r); }, Qt::QueuedConnection);
  });
  QObject::connect(t, &QThread::finished, t, &QObject::deleteLater);
  t->start();
  return HashJob(cancel, t);
}

}  // namespace moe
