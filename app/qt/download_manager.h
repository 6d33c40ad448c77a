// Model downloads that survive what real links do: each file is written to
// "<dest>.part", resumed with an HTTP Range request from the .part's size, aborted
// and retried with exponential backoff when no byte arrives for a while, then
// checked (size, SHA-256, hashed on a worker thread) and renamed atomically to
// <dest>. A wrong checksum fails the download: <dest> never appears.
//
// Lives on the GUI thread and never blocks it (QNetworkAccessManager is
// asynchronous; hashing runs on its own thread). The queue is kept in the
// database through DownloadStore, so a new manager on the same database picks up
// what was unfinished. Timings are injectable (DownloadTimings) so tests run in
// milliseconds.
#pragma once

#include <QElapsedTimer>
#include <QFile>
#include <QList>
#include <QNetworkAccessManager>
#include <QObject>
#include <QPointer>
#include <QTimer>
#include <QUrl>
#include <deque>
#include <functional>
#include <map>
#include <memory>

#include "app/core/download_store.h"
#include "app/qt/download_speed.h"
#include "app/qt/download_verify.h"
#include "app/qt/file_hasher.h"

class QNetworkReply;

namespace moe {

class ModelRegistry;

struct DownloadTimings {
  int stall_ms = 30000;         // no byte for this long: abort the request and retry
  int idle_ms = 2000;           // no byte for this long: report 0 B/s ("stalled")
  int backoff_first_ms = 1000;  // first retry delay; doubles per failed attempt
  int backoff_max_ms = 60000;   // cap on the delay
  int max_attempts = 6;         // consecutive attempts without progress before failing
  int speed_window_ms = 5000;   // sliding window of the speed figure
  int progress_ms = 250;        // progress signal period (at most)
  int persist_ms = 2000;        // how often bytes_done reaches the database while running
  // The clock of idle_ms and stall_ms, in milliseconds; empty: the monotonic clock. A
  // test passes one it advances itself, so a busy machine never looks like a dead link.
  std::function<qint64()> idle_clock_ms;
};

// One download as the UI sees it.
struct DownloadStatus {
  qint64 id = 0;
  QUrl url;
  QString dest;   // final path
  QString state;  // queued | running | paused | verifying | done | failed
  QString error;  // why it failed (state failed), or the last retried error
  qint64 bytes_done = 0;
  qint64 total = -1;  // -1 unknown
  double bytes_per_sec = 0;
  qint64 eta_s = -1;     // -1 unknown
  bool stalled = false;  // no byte for idle_ms: speed shows 0
  int attempt = 0;       // retries so far in the current run of failures
  QString catalog_id;
};

class DownloadManager : public QObject {
  Q_OBJECT

 public:
  // `registry` (optional): verified files are registered there when they finish.
  DownloadManager(DownloadStore& store, ModelRegistry* registry, DownloadTimings timings = {},
                  QObject* parent = nullptr);
  ~DownloadManager() override;

  // Queues a download and returns its id. `sha256` empty: no published checksum,
  // the size alone is checked (`expected_size` -1: unknown, not checked).
  // Throws std::invalid_argument for a non-http(s) url or an empty destination.
  // A destination already in the queue returns that download's id (resumed if it
  // was paused or failed) instead of a second writer of the same .part.
  qint64 enqueue(const QUrl& url, const QString& dest, const QString& sha256 = {}, qint64 expected_size = -1,
                 const QString& catalog_id = {});
  void pause(qint64 id);
  void resume(qint64 id);  // a paused or failed download goes back into the queue
  void cancel(qint64 id);  // stops it, deletes its .part and forgets it

  void setMaxActive(int n);  // downloads running at once (default 1)
  // Free bytes on the volume holding a folder; by default QStorageInfo's
  // bytesAvailable (what this user may write). Tests put a smaller disk behind it.
  using FreeSpaceProbe = std::function<qint64(const QString& dir)>;
  void setFreeSpaceProbe(FreeSpaceProbe probe) { free_space_ = std::move(probe); }
  // The check a download makes before it writes (and again when the server names
  // the size): the bytes still to come, plus a margin, must fit. Empty when they
  // do; else the reason.
  QString diskSpaceProblem(const QString& dest, qint64 bytes_to_come) const;
  static constexpr qint64 kDiskMarginBytes = 256 * 1024 * 1024;
  QList<DownloadStatus> downloads() const;
  DownloadStatus status(qint64 id) const;  // id 0 when unknown

  static QString partPath(const QString& dest) { return dest + QStringLiteral(".part"); }

 signals:
  void added(qint64 id);
  void stateChanged(qint64 id, const QString& state);
  void progress(qint64 id, qint64 bytes_done, qint64 total, double bytes_per_sec, qint64 eta_s);
  void retrying(qint64 id, int attempt, int delay_ms, const QString& reason);
  void finished(qint64 id, const QString& path);
  void failed(qint64 id, const QString& error);

 private:
  struct Job {
    DownloadRecord rec;
    QPointer<QNetworkReply> reply;
    std::unique_ptr<QFile> part;
    qint64 total = -1;
    int attempt = 0;          // consecutive failed attempts
    int restarts = 0;         // restarts from byte 0 (misplaced Content-Range, Range ignored)
    bool progressed = false;  // bytes arrived during the current attempt
    bool abort_for_stall = false;
    bool abort_for_user = false;
    bool restart_from_zero = false;
    qint64 disk_checked_block = -1;  // size unknown: free space last checked at this 64 MiB block
    QString fatal;  // why the reply was aborted for good (no disk space, too many bytes, ...): failed
    qint64 last_byte_ms = -1;  // idleClockMs() at the last byte (or the attempt's start); -1 not running
    QElapsedTimer since_persist;
    QElapsedTimer run_clock;  // time base of the speed samples
    SpeedMeter speed;
    QTimer retry_timer;
    HashJob hash;
  };

  Job* find(qint64 id) const;
  Job& adopt(std::unique_ptr<Job> j);  // timers and speed window set up, added to jobs_
  void schedule();
  void startJob(Job& j);
  void onHeaders(Job& j);
  void onData(Job& j);
  void onReplyFinished(Job& j);
  void retryLater(Job& j, const QString& reason);
  void verify(Job& j);
  void onVerified(qint64 id, const FileHashResult& r, const GgufSummary& gguf);
  void fail(Job& j, const QString& error);
  void setState(Job& j, const QString& state);
  void persist(Job& j);
  void tick();
  void emitProgress(Job& j);
  int activeCount() const;
  DownloadStatus statusOf(const Job& j) const;
  qint64 idleClockMs() const;  // t_.idle_clock_ms, or the monotonic clock
  void loadUnfinished();

  DownloadStore& store_;
  ModelRegistry* registry_;
  DownloadTimings t_;
  QElapsedTimer monotonic_;
  QNetworkAccessManager nam_;
  FreeSpaceProbe free_space_;
  QTimer ticker_;
  int max_active_ = 1;
  std::map<qint64, std::unique_ptr<Job>> jobs_;  // by id; queue order = id order
};

}  // namespace moe
