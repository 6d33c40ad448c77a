// A real HTTP/1.1 server on 127.0.0.1 (ephemeral port) that answers GET requests
// by path from a table of recorded responses (status, content type, body), 404
// for anything else, and remembers every request line so a test can check what
// the client asked (e.g. the query of a search). Bodies are sent whole with a
// Content-Length; "Range: bytes=N-" is honoured with a 206. Runs on the thread
// that creates it; no Q_OBJECT, so it needs no moc.
#pragma once

#include <QByteArray>
#include <QHostAddress>
#include <QMap>
#include <QRegularExpression>
#include <QStringList>
#include <QTcpServer>
#include <QTcpSocket>
#include <QUrl>

namespace moe::test {

class RecordedHttpServer : public QObject {
 public:
  struct Response {
    int status = 200;
    QByteArray content_type = "application/json; charset=utf-8";
    QByteArray body;
  };

  RecordedHttpServer() {
    QObject::connect(&server_, &QTcpServer::newConnection, this, [this] {
      while (QTcpSocket* s = server_.nextPendingConnection()) {
        QObject::connect(s, &QTcpSocket::readyRead, this, [this, s] { onRead(s); });
        QObject::connect(s, &QTcpSocket::disconnected, s, &QObject::deleteLater);
      }
    });
  }

  bool start() { return server_.listen(QHostAddress::LocalHost, 0); }
  QUrl base() const { return QUrl(QStringLiteral("http://127.0.0.1:%1").arg(server_.serverPort())); }
  // The response for a path (the query is not part of the key).
  void route(const QString& path, Response r) { routes_.insert(path, std::move(r)); }
  // Request targets ("/api/models?search=...") in the order they came.
  const QStringList& requests() const { return requests_; }

 private:
  void onRead(QTcpSocket* s) {
    QByteArray& buf = pending_[s];
    buf += s->readAll();
    const int end = buf.indexOf("\r\n\r\n");
    if (end < 0) return;
    const QByteArray head = buf.left(end);
    buf.clear();
    const QList<QByteArray> lines = head.split('\n');
    const QList<QByteArray> first = lines.value(0).trimmed().split(' ');
    const QString target = QString::fromUtf8(first.value(1));
    requests_ << target;
    const QString path = QUrl(target).path(QUrl::FullyDecoded);
    qint64 from = 0;
    for (const QByteArray& l : lines) {
      static const QRegularExpression range(QStringLiteral("^range:\\s*bytes=(\\d+)-"),
                                            QRegularExpression::CaseInsensitiveOption);
      const auto m = range.match(QString::fromLatin1(l.trimmed()));
      if (m.hasMatch()) from = m.captured(1).toLongLong();
    }
    const auto it = routes_.find(path);
    QByteArray out;
    if (it == routes_.end()) {
      out = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    } else {
      const Response& r = *it;
      const bool partial = from > 0 && from < r.body.size() && r.status == 200;
      const QByteArray body = partial ? r.body.mid(from) : r.body;
      out = "HTTP/1.1 " + QByteArray::number(partial ? 206 : r.status) +
            (partial ? " Partial Content" : " OK") + "\r\nContent-Type: " + r.content_type +
            "\r\nContent-Length: " + QByteArray::number(body.size()) +
            (partial ? "\r\nContent-Range: bytes " + QByteArray::number(from) + "-" +
                           QByteArray::number(r.body.size() - 1) + "/" + QByteArray::number(r.body.size())
                     : QByteArray()) +
            "\r\nConnection: close\r\n\r\n" + body;
    }
    s->write(out);
    s->disconnectFromHost();
  }

  QTcpServer server_;
  QMap<QString, Response> routes_;
  QMap<QTcpSocket*, QByteArray> pending_;
  QStringList requests_;
};

}  // namespace moe::test
