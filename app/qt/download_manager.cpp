#include "app/qt/download_manager.h"

#include <QDir>
#include <QFileInfo>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QRegularExpression>
#include <QStorageInfo>
#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "app/core/model_registry.h"
#include "app/qt/download_state.h"
#include "app/qt/download_verify.h"

namespace moe {

using namespace download_state;

DownloadManager::DownloadManager(DownloadStore& store, ModelRegistry* registry, DownloadTimings timings,
                                 QObject* parent)
    : QObject(parent), store_(store), registry_(registry), t_(timings) {
  monotonic_.start();
  ticker_.setInterval(std::max(10, std::min(t_.progress_ms, t_.idle_ms / 2)));
  connect(&ticker_, &QTimer::timeout, this, &DownloadManager::tick);
  loadUnfinished();
  // Start on the next turn of the event loop, so a caller can connect signals first.
  QTimer::singleShot(0, this, &DownloadManager::schedule);
}

DownloadManager::~DownloadManager() {
  for (auto& [id, j] : jobs_) {
    j->hash.cancelAndWait();
    if (j->reply) {
      j->abort_for_user = true;
      j->reply->disconnect(this);
      j->reply->abort();
    }
    if (j->part) j->part->flush();
    // A running download is "queued" in the database: the next manager resumes it.
    if (j->rec.state == s(kRunning)) {
      j->rec.state = s(kQueued);
      persist(*j);
    }
  }
}

void DownloadManager::loadUnfinished() {
  for (DownloadRecord& r : store_.unfinished()) {
    auto j = std::make_unique<Job>();
    j->rec = std::move(r);
    // A run that was interrupted (app closed or crashed) goes back into the queue;
    // the .part on disk, not the database, says how far it got.
    if (j->rec.state == s(kRunning) || j->rec.state == s(kVerifying)) j->rec.state = s(kQueued);
    j->rec.bytes_done = QFileInfo(partPath(q(j->rec.dest_path))).size();
    adopt(std::move(j));
  }
}

DownloadManager::Job& DownloadManager::adopt(std::unique_ptr<Job> j) {
  j->total = j->rec.expected_size;
  j->speed.setWindow(t_.speed_window_ms);
  j->retry_timer.setSingleShot(true);
  const qint64 id = j->rec.id;
  connect(&j->retry_timer, &QTimer::timeout, this, [this, id] {
    if (Job* job = find(id); job && job->rec.state == s(kQueued)) schedule();
  });
  return *(jobs_[id] = std::move(j));
}

qint64 DownloadManager::enqueue(const QUrl& url, const QString& dest, const QString& sha256,
                                qint64 expected_size, const QString& catalog_id) {
  if (!url.isValid() || (url.scheme() != QStringLiteral("http") && url.scheme() != QStringLiteral("https")))
    throw std::invalid_argument("not an http(s) URL: " + s(url.toString()));
  if (dest.isEmpty()) throw std::invalid_argument("no destination path for " + s(url.toString()));
  static const QRegularExpression kHex(QStringLiteral("^[0-9a-f]{64}$"));
  const QString sha = sha256.trimmed().toLower();
  if (!sha.isEmpty() && !kHex.match(sha).hasMatch())
    throw std::invalid_argument("not a SHA-256 (64 hex digits): " + s(sha256));
  const std::string dest_path = s(QFileInfo(dest).absoluteFilePath());
  // Two jobs writing one .part would interleave their bytes: the same destination
  // again means the download already queued (a paused or failed one is resumed).
  for (auto& [id, job] : jobs_)
    if (job->rec.dest_path == dest_path && job->rec.state != s(kDone)) {
      resume(id);
      return id;
    }
  QDir().mkpath(QFileInfo(dest).absolutePath());

  auto j = std::make_unique<Job>();
  j->rec.url = s(url.toString());
  j->rec.dest_path = dest_path;
  j->rec.sha256 = s(sha);
  j->rec.expected_size = expected_size;
  j->rec.state = s(kQueued);
  j->rec.catalog_id = s(catalog_id);
  j->rec.bytes_done = QFileInfo(partPath(q(j->rec.dest_path))).size();
  j->rec.id = store_.add(j->rec);
  const qint64 id = adopt(std::move(j)).rec.id;
  emit added(id);
  QTimer::singleShot(0, this, &DownloadManager::schedule);
  return id;
}

DownloadManager::Job* DownloadManager::find(qint64 id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

int DownloadManager::activeCount() const {
  int n = 0;
  for (const auto& [id, j] : jobs_) n += j->rec.state == s(kRunning) || j->rec.state == s(kVerifying);
  return n;
}

void DownloadManager::setMaxActive(int n) {
  max_active_ = std::max(1, n);
  schedule();
}

// Starts queued downloads, oldest first, up to the limit; one waiting for its
// backoff delay is skipped until its timer fires.
void DownloadManager::schedule() {
  for (auto& [id, j] : jobs_) {
    if (activeCount() >= max_active_) return;
    if (j->rec.state == s(kQueued) && !j->retry_timer.isActive()) startJob(*j);
  }
}

QString DownloadManager::diskSpaceProblem(const QString& dest, qint64 bytes_to_come) const {
  if (bytes_to_come <= 0) return {};
  const QString dir = QFileInfo(dest).absolutePath();
  const qint64 free = free_space_ ? free_space_(dir) : QStorageInfo(dir).bytesAvailable();
  if (free < 0 || bytes_to_come + kDiskMarginBytes <= free) return {};  // < 0: unknown, not checked
  auto gb = [](qint64 b) { return QString::number(double(b) / 1e9, 'f', 2) + " GB"; };
  return QStringLiteral(
             "not enough disk space in %1: %2 still to download (plus %3 spare), %4 free. "
             "Free some space, then resume; what was downloaded is kept.")
      .arg(dir, gb(bytes_to_come), gb(kDiskMarginBytes), gb(free));
}

void DownloadManager::verify(Job& j) {
  j.part.reset();  // closed: the hasher reads what is on disk
  setState(j, kVerifying);
  emitProgress(j);
  const qint64 id = j.rec.id;
  const QString part_path = partPath(q(j.rec.dest_path));
  // Hash, then read the header with the engine's reader, both on the worker thread.
  auto summary = std::make_shared<GgufSummary>();
  j.hash = hashFileAsync(
      part_path, this, [this, id, summary](FileHashResult r) { onVerified(id, r, *summary); },
      [part_path, summary] { *summary = inspectGguf(part_path); });
}

void DownloadManager::onVerified(qint64 id, const FileHashResult& r, const GgufSummary& gguf) {
  Job* jp = find(id);
  if (!jp || jp->rec.state != s(kVerifying)) return;
  Job& j = *jp;
  const QString part_path = partPath(q(j.rec.dest_path));
  if (!r.ok) {
    fail(j, r.error);
    return;
  }
  const QString want = q(j.rec.sha256);
  QString problem;
  if (j.rec.expected_size >= 0 && r.size != j.rec.expected_size)
    problem = QStringLiteral("size mismatch: expected %1 bytes, got %2").arg(j.rec.expected_size).arg(r.size);
  else if (!want.isEmpty() && r.sha256 != want)
    problem = QStringLiteral("checksum mismatch: expected SHA-256 %1, got %2").arg(want, r.sha256);
  if (!problem.isEmpty()) {
    // A corrupt .part would only resume into the same mismatch: remove it.
    QFile::remove(part_path);
    j.rec.bytes_done = 0;
    fail(j, problem);
    return;
  }
  if (!gguf.ok) {
    // The bytes are what was asked for, but not a model this engine can open: keep
    // the .part (a newer moechat may read it) and do not register it.
    fail(j, QStringLiteral("not a usable GGUF model: %1").arg(gguf.error));
    return;
  }
  // rename(2) replaces the destination atomically: readers see the old file or the whole new one.
  std::error_code ec;
  std::filesystem::rename(part_path.toStdString(), j.rec.dest_path, ec);
  if (ec) {
    fail(j, QStringLiteral("cannot rename %1: %2").arg(part_path, q(ec.message())));
    return;
  }
  j.rec.sha256 = s(r.sha256);
  j.rec.bytes_done = r.size;
  j.total = r.size;
  j.rec.error.clear();
  if (registry_) {
    ModelRecord m;
    m.path = j.rec.dest_path;
    m.sha256 = j.rec.sha256;
    m.name = s(gguf.name.isEmpty() ? QFileInfo(q(j.rec.dest_path)).completeBaseName() : gguf.name);
    m.arch = s(gguf.arch);
    m.quant = s(gguf.quant);
    m.size_bytes = r.size;
    m.source_url = j.rec.url;
    try {
      registry_->upsert(m);
    } catch (const std::exception& e) {
      fail(j, QStringLiteral("downloaded, but not registered: %1").arg(QString::fromUtf8(e.what())));
      return;
    }
  }
  setState(j, kDone);
  emitProgress(j);
  emit finished(id, q(j.rec.dest_path));
  schedule();
}

void DownloadManager::fail(Job& j, const QString& error) {
  j.part.reset();
  j.rec.error = s(error);
  setState(j, kFailed);
  emit failed(j.rec.id, error);
  schedule();
}

void DownloadManager::pause(qint64 id) {
  Job* j = find(id);
  if (!j || (j->rec.state != s(kRunning) && j->rec.state != s(kQueued))) return;
  j->retry_timer.stop();
  if (j->reply) {
    j->abort_for_user = true;
    j->reply->abort();
  }
  j->part.reset();
  setState(*j, kPaused);
  emitProgress(*j);
  schedule();
}

void DownloadManager::resume(qint64 id) {
  Job* j = find(id);
  if (!j || (j->rec.state != s(kPaused) && j->rec.state != s(kFailed))) return;
  j->attempt = 0;
  j->rec.error.clear();
  setState(*j, kQueued);
  schedule();
}

void DownloadManager::cancel(qint64 id) {
  Job* j = find(id);
  if (!j) return;
  j->retry_timer.stop();
  j->hash.cancelAndWait();
  if (j->reply) {
    j->abort_for_user = true;
    j->reply->disconnect(this);
    j->reply->abort();
    j->reply->deleteLater();
  }
  j->part.reset();
  if (j->rec.state != s(kDone)) QFile::remove(partPath(q(j->rec.dest_path)));
  try {
    store_.remove(id);
  } catch (const std::exception& e) {
    qWarning("download %lld: cannot remove its row: %s", static_cast<long long>(id), e.what());
  }
  jobs_.erase(id);
  emit stateChanged(id, QStringLiteral("cancelled"));
  schedule();
}

void DownloadManager::setState(Job& j, const QString& state) {
  j.rec.state = s(state);
  persist(j);
  emit stateChanged(j.rec.id, state);
}

void DownloadManager::persist(Job& j) {
  // Called from slots and the destructor: a database error must not escape into
  // Qt's event loop. The download goes on; the next save or restart corrects the row.
  try {
    store_.update(j.rec.id, j.rec.state, j.rec.bytes_done, j.rec.error);
  } catch (const std::exception& e) {
    qWarning("download %lld: cannot save its state: %s", static_cast<long long>(j.rec.id), e.what());
  }
}

// Progress and stall detection for every running download (one timer for all).
void DownloadManager::tick() {
  bool any = false;
  for (auto& [id, jp] : jobs_) {
    Job& j = *jp;
    if (j.rec.state != s(kRunning) || !j.reply) continue;
    any = true;
    if (idleClockMs() - j.last_byte_ms >= t_.stall_ms) {
      j.abort_for_stall = true;
      j.reply->abort();
      continue;
    }
    j.speed.sample(j.run_clock.elapsed(), j.rec.bytes_done);
    emitProgress(j);
  }
  if (!any) ticker_.stop();
}

qint64 DownloadManager::idleClockMs() const {
  return t_.idle_clock_ms ? t_.idle_clock_ms() : monotonic_.elapsed();
}

void DownloadManager::emitProgress(Job& j) {
  const DownloadStatus st = statusOf(j);
  emit progress(st.id, st.bytes_done, st.total, st.bytes_per_sec, st.eta_s);
}

DownloadStatus DownloadManager::statusOf(const Job& j) const {
  DownloadStatus st;
  st.id = j.rec.id;
  st.url = QUrl(q(j.rec.url));
  st.dest = q(j.rec.dest_path);
  st.state = q(j.rec.state);
  st.error = q(j.rec.error);
  st.bytes_done = j.rec.bytes_done;
  st.total = j.total;
  st.attempt = j.attempt;
  st.catalog_id = q(j.rec.catalog_id);
  if (j.rec.state == s(kRunning) && j.last_byte_ms >= 0) {
    // The speed over the window, unless nothing arrived lately: then it is 0, not
    // a slowly decaying average that hides a dead link.
    st.stalled = idleClockMs() - j.last_byte_ms >= t_.idle_ms;
    st.bytes_per_sec = st.stalled ? 0.0 : j.speed.bytesPerSecond();
    st.eta_s = SpeedMeter::etaSeconds(st.total >= 0 ? st.total - st.bytes_done : -1, st.bytes_per_sec);
  }
  return st;
}

QList<DownloadStatus> DownloadManager::downloads() const {
  QList<DownloadStatus> out;
  for (const auto& [id, j] : jobs_) out.append(statusOf(*j));
  return out;
}

DownloadStatus DownloadManager::status(qint64 id) const {
  const Job* j = find(id);
  return j ? statusOf(*j) : DownloadStatus{};
}

}  // namespace moe
