// One attempt of a download over HTTP: the request (a Range from the .part's
// size), the headers (resume, restart or refuse), the body written to the .part
// with the disk checked as it grows, and the reply's end: verified when complete,
// retried later after a transient failure, failed otherwise.
#include <QFileInfo>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QRegularExpression>
#include <algorithm>
#include <utility>

#include "app/qt/download_manager.h"
#include "app/qt/download_state.h"

namespace moe {

using namespace download_state;

namespace {

// Restarts from byte 0 (a misplaced Content-Range, or a 200 to a Range request
// that then ends early): a server that always does this would otherwise loop
// forever, each restart making "progress".
constexpr int kMaxRestarts = 3;

// With neither a published size nor a Content-Length, a body is cut off at this
// size, and the free space is checked again every kDiskRecheckBytes written.
constexpr qint64 kMaxUnknownSizeBytes = qint64{1} << 40;  // 1 TiB, above any model file
constexpr qint64 kDiskRecheckBytes = qint64{64} << 20;

// "bytes 100-999/1000" -> {100, 1000}; total -1 for "*"; start -1 when malformed.
std::pair<qint64, qint64> parseContentRange(const QByteArray& v) {
  static const QRegularExpression re(QStringLiteral("^bytes (\\d+)-(\\d+)/(\\d+|\\*)$"));
  const auto m = re.match(QString::fromLatin1(v.trimmed()));
  if (!m.hasMatch()) return {-1, -1};
  const qint64 total = m.captured(3) == QStringLiteral("*") ? -1 : m.captured(3).toLongLong();
  return {m.captured(1).toLongLong(), total};
}

// Network errors worth another attempt (the link or the server hiccuped); the
// rest (404, 403, bad url, TLS failure) fail at once.
// Why a reply failed, in words: a refused or endless redirect is not its last hop's
// "302 Found".
QString failureText(QNetworkReply& reply, QNetworkReply::NetworkError e, int http_status) {
  const QString to = QString::fromUtf8(reply.rawHeader("Location"));
  if (e == QNetworkReply::InsecureRedirectError)
    return QStringLiteral("refused a redirect from a secure address to an insecure one (%1)").arg(to);
  if (e == QNetworkReply::TooManyRedirectsError)
    return QStringLiteral("the server redirected too many times (last to %1); the link may be broken")
        .arg(to);
  if (http_status >= 300)
    return QStringLiteral("HTTP %1 %2")
        .arg(http_status)
        .arg(reply.attribute(QNetworkRequest::HttpReasonPhraseAttribute).toString());
  return reply.errorString();
}

bool isTransient(QNetworkReply::NetworkError e, int http_status) {
  if (http_status >= 500) return true;
  if (http_status >= 400) return http_status == 408 || http_status == 429;
  switch (e) {
    case QNetworkReply::RemoteHostClosedError:
    case QNetworkReply::TimeoutError:
    case QNetworkReply::TemporaryNetworkFailureError:
    case QNetworkReply::NetworkSessionFailedError:
    case QNetworkReply::ProxyConnectionClosedError:
    case QNetworkReply::ProxyTimeoutError:
    case QNetworkReply::ConnectionRefusedError:
    case QNetworkReply::HostNotFoundError:
    case QNetworkReply::UnknownNetworkError:
    case QNetworkReply::ServiceUnavailableError:
    case QNetworkReply::InternalServerError:
    case QNetworkReply::OperationCanceledError: return true;
    default: return false;
  }
}

}  // namespace

void DownloadManager::startJob(Job& j) {
  const QString part_path = partPath(q(j.rec.dest_path));
  j.part = std::make_unique<QFile>(part_path);
  if (!j.part->open(QIODevice::ReadWrite)) {
    fail(j, QStringLiteral("cannot write %1: %2").arg(part_path, j.part->errorString()));
    return;
  }
  qint64 offset = j.part->size();
  if (j.rec.expected_size >= 0 && offset > j.rec.expected_size) {
    // Longer than the file can be: it is not a prefix of it. Start over.
    j.part->resize(0);
    offset = 0;
  }
  j.part->seek(offset);
  j.rec.bytes_done = offset;
  if (j.rec.expected_size >= 0) {
    if (QString why = diskSpaceProblem(q(j.rec.dest_path), j.rec.expected_size - offset); !why.isEmpty()) {
      j.part.reset();
      fail(j, why);
      return;
    }
  }
  setState(j, kRunning);
  if (j.rec.expected_size >= 0 && offset == j.rec.expected_size && offset > 0) {
    verify(j);  // everything arrived before the last run ended
    return;
  }

  QNetworkRequest req{QUrl(q(j.rec.url))};
  req.setAttribute(QNetworkRequest::RedirectPolicyAttribute, QNetworkRequest::NoLessSafeRedirectPolicy);
  req.setRawHeader("User-Agent", "moechat");
  if (offset > 0) req.setRawHeader("Range", "bytes=" + QByteArray::number(offset) + "-");
  j.progressed = false;
  j.disk_checked_block = -1;
  j.abort_for_stall = j.abort_for_user = j.restart_from_zero = false;
  j.last_byte_ms = idleClockMs();
  j.since_persist.start();
  j.run_clock.start();
  j.speed.reset();
  j.speed.sample(0, offset);
  j.reply = nam_.get(req);
  const qint64 id = j.rec.id;
  connect(j.reply, &QNetworkReply::metaDataChanged, this, [this, id] {
    if (Job* job = find(id)) onHeaders(*job);
  });
  connect(j.reply, &QNetworkReply::readyRead, this, [this, id] {
    if (Job* job = find(id)) onData(*job);
  });
  connect(j.reply, &QNetworkReply::finished, this, [this, id] {
    if (Job* job = find(id)) onReplyFinished(*job);
  });
  if (!ticker_.isActive()) ticker_.start();
  emitProgress(j);
}

// The status line decides what the body is: 206 continues the .part (only if
// Content-Range starts where the .part ends), 200 is the whole file from byte 0.
void DownloadManager::onHeaders(Job& j) {
  if (!j.reply) return;
  const int status = j.reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
  if (status == 0 || (status >= 300 && status < 400)) return;  // redirect hop: headers of the next
  const qint64 offset = j.part->size();
  if (status == 206) {
    const auto [start, total] = parseContentRange(j.reply->rawHeader("Content-Range"));
    if (start != offset) {
      // The server resumed somewhere else: appending would corrupt the file.
      j.restart_from_zero = true;
      j.reply->abort();
      return;
    }
    if (total >= 0) j.total = total;
  } else if (status == 200) {
    if (offset > 0) {  // the server ignored Range: the body starts at byte 0
      if (++j.restarts > kMaxRestarts) {
        j.fatal = QStringLiteral(
                      "the server ignores resume requests (it sent the whole file again %1 times) and the "
                      "connection keeps ending early; try again later or another mirror")
                      .arg(j.restarts);
        j.reply->abort();
        return;
      }
      j.part->resize(0);
      j.part->seek(0);
      j.rec.bytes_done = 0;
      j.speed.reset();
      j.speed.sample(j.run_clock.elapsed(), 0);
    }
    const qint64 len = j.reply->header(QNetworkRequest::ContentLengthHeader).toLongLong();
    if (len > 0) j.total = len;
  }
  // When the server's size differs from the expected one, the server's is what
  // will arrive; the size check after the download names both.
  if (j.total >= 0) {
    if (QString why = diskSpaceProblem(q(j.rec.dest_path), j.total - j.part->size()); !why.isEmpty()) {
      j.fatal = why;  // onReplyFinished fails the download (no retry)
      j.reply->abort();
    }
  }
}

void DownloadManager::onData(Job& j) {
  if (!j.reply || !j.part) return;
  const int status = j.reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
  if (status != 200 && status != 206) return;  // an error page's body is not the file
  if (!j.fatal.isEmpty()) return;              // aborted for good: nothing more is written
  const QByteArray data = j.reply->readAll();
  if (data.isEmpty()) return;
  // Never more than the file can be: the published size, else the announced one.
  const qint64 cap = j.rec.expected_size >= 0 ? j.rec.expected_size
                     : j.total >= 0           ? j.total
                                              : kMaxUnknownSizeBytes;
  if (j.rec.bytes_done + data.size() > cap) {
    j.fatal = QStringLiteral("the server sent more than the %1 bytes %2; stopped before writing them")
                  .arg(cap)
                  .arg(j.rec.expected_size >= 0 ? QStringLiteral("expected")
                       : j.total >= 0           ? QStringLiteral("it announced")
                                                : QStringLiteral("allowed for a file of unknown size"));
    j.reply->abort();
    return;
  }
  const qint64 disk_block = (j.rec.bytes_done + data.size()) / kDiskRecheckBytes;
  if (j.total < 0 && j.rec.expected_size < 0 && disk_block != j.disk_checked_block) {
    j.disk_checked_block = disk_block;
    if (QString why = diskSpaceProblem(q(j.rec.dest_path), kDiskRecheckBytes); !why.isEmpty()) {
      j.fatal = why;
      j.reply->abort();
      return;
    }
  }
  if (j.part->write(data) != data.size()) {
    const QString why = j.part->errorString();
    j.abort_for_user = true;
    j.reply->abort();
    fail(j, QStringLiteral("cannot write %1: %2").arg(j.part->fileName(), why));
    return;
  }
  j.rec.bytes_done += data.size();
  j.progressed = true;
  j.last_byte_ms = idleClockMs();
  if (j.since_persist.elapsed() >= t_.persist_ms) {
    j.part->flush();
    persist(j);
    j.since_persist.restart();
  }
}

void DownloadManager::onReplyFinished(Job& j) {
  QNetworkReply* reply = j.reply;
  if (!reply) return;
  if (j.abort_for_user) {  // pause / cancel set the state; the .part keeps what was written
    j.reply = nullptr;
    reply->deleteLater();
    return;
  }
  if (reply->isOpen()) onData(j);  // bytes that arrived with the end of the stream
  if (!j.fatal.isEmpty()) {
    j.reply = nullptr;
    reply->deleteLater();
    if (j.part) j.part->flush();
    const QString why = std::exchange(j.fatal, QString());
    fail(j, why);
    return;
  }
  j.reply = nullptr;
  reply->deleteLater();
  if (j.part) j.part->flush();
  const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
  const auto err = reply->error();
  if (j.restart_from_zero) {
    j.part->resize(0);
    j.rec.bytes_done = 0;
    if (++j.restarts > kMaxRestarts) {
      fail(j, QStringLiteral("the server keeps resuming at the wrong offset"));
      return;
    }
    retryLater(j, QStringLiteral("the server resumed at the wrong offset; starting over"));
    return;
  }
  if (j.abort_for_stall) {
    retryLater(j, QStringLiteral("no data for %1 s").arg(t_.stall_ms / 1000.0));
    return;
  }
  if (status == 416 && j.part->size() > 0) {
    // Nothing left to send from our offset ("bytes */<size>"): the .part is complete
    // when it has the server's size (verification then checks it), else start over.
    const QByteArray cr = reply->rawHeader("Content-Range").trimmed();
    const qint64 server_size = cr.startsWith("bytes */") ? cr.mid(8).toLongLong() : -1;
    if (j.part->size() == server_size ||
        (server_size < 0 && (j.rec.expected_size < 0 || j.part->size() == j.rec.expected_size))) {
      verify(j);
    } else {
      j.part->resize(0);
      j.rec.bytes_done = 0;
      retryLater(j, QStringLiteral("the server refused the resume offset; starting over"));
    }
    return;
  }
  if (err != QNetworkReply::NoError) {
    const QString why = failureText(*reply, err, status);
    if (isTransient(err, status))
      retryLater(j, why);
    else
      fail(j, why);
    return;
  }
  if (j.total >= 0 && j.part->size() < j.total) {
    retryLater(j, QStringLiteral("the connection ended at %1 of %2 bytes").arg(j.part->size()).arg(j.total));
    return;
  }
  verify(j);
}

void DownloadManager::retryLater(Job& j, const QString& reason) {
  if (j.progressed) j.attempt = 0;  // a run that made progress resets the count
  ++j.attempt;
  j.rec.error = s(reason);
  if (j.attempt >= t_.max_attempts) {
    fail(j, QStringLiteral("gave up after %1 attempts: %2").arg(j.attempt).arg(reason));
    return;
  }
  const int delay = int(std::min<qint64>(qint64(t_.backoff_first_ms) << (j.attempt - 1), t_.backoff_max_ms));
  j.part.reset();
  setState(j, kQueued);
  emit retrying(j.rec.id, j.attempt, delay, reason);
  j.retry_timer.start(delay);
  schedule();  // another download may use the slot meanwhile
}

}  // namespace moe
