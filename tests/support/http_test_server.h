// A real HTTP/1.1 server on 127.0.0.1 (ephemeral port) for the download tests.
// It serves one byte array at any path (except /missing: 404; /moved: a 302 to
// /model.gguf; /loop: a 302 to itself, forever), honours
// "Range: bytes=N-" with 206 + Content-Range, and can misbehave on purpose the
// way real mirrors do: drop the connection part way, stall with the socket open,
// ignore Range, or serve the wrong bytes. Every request's Range header is recorded
// so a test can assert where a resume started. Runs on the thread that creates it
// (the test's event loop); no Q_OBJECT, so it needs no moc.
#pragma once

#include <QByteArray>
#include <QHostAddress>
#include <QList>
#include <QObject>
#include <QPair>
#include <QPointer>
#include <QRegularExpression>
#include <QString>
#include <QStringList>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTimer>
#include <QUrl>
#include <memory>

namespace moe::test {

class HttpTestServer : public QObject {
 public:
  enum class Mode {
    Normal,           // 200 / 206 as asked
    Drop,             // close the connection after `at` body bytes
    Stall,            // stop sending after `at` body bytes, keep the socket open
    IgnoreRange,      // always 200 with the whole body
    WrongContent,     // the right length, different bytes
    ShiftedRange,     // 206 for a Range, but starting 100 bytes before the offset asked for
    IgnoreRangeDrop,  // 200 with the whole body whatever the Range, closed after `at` bytes
    Endless,          // 200 without a Content-Length, the body repeated until the peer leaves
  };

  explicit HttpTestServer(QByteArray body, QObject* parent = nullptr)
      : QObject(parent), body_(std::move(body)) {
    QObject::connect(&server_, &QTcpServer::newConnection, this, [this] { acceptAll(); });
  }

  // Listens on 127.0.0.1 at a port the OS picks. False when that fails.
  bool start() { return server_.listen(QHostAddress::LocalHost, 0); }
  quint16 port() const { return server_.serverPort(); }
  QUrl url(const QString& path = QStringLiteral("/model.gguf")) const {
    return QUrl(QStringLiteral("http://127.0.0.1:%1%2").arg(port()).arg(path));
  }
  const QByteArray& body() const { return body_; }

  // `at`: body bytes sent before the drop/stall (counted from the start of the
  // response, whatever its Range). `first_only`: only the first request
  // misbehaves, later ones are served normally.
  void setMode(Mode mode, qint64 at = 0, bool first_only = true) {
    mode_ = mode;
    at_ = at;
    first_only_ = first_only;
  }
  // One mode per request, in order (then Normal): e.g. drop, then a bad resume.
  void setScript(QList<QPair<Mode, qint64>> script) {
    script_ = std::move(script);
    script_step_ = -1;
  }
  // Bytes per write and the pause between writes: a slow link, so a test can
  // watch progress or pause mid-way.
  void setPacing(int chunk_bytes, int delay_ms) {
    chunk_bytes_ = chunk_bytes;
    delay_ms_ = delay_ms;
  }

  int requestCount() const { return range_headers_.size(); }
  // The Range header of each request in order ("" when it had none).
  QStringList rangeHeaders() const { return range_headers_; }
  // Connections still open (a stalled one stays open until the client gives up).
  int openConnections() const {
    int n = 0;
    for (const auto& c : conns_)
      if (c->socket && c->socket->state() == QAbstractSocket::ConnectedState) ++n;
    return n;
  }

 private:
  struct Conn {
    QPointer<QTcpSocket> socket;
    QByteArray request;
    QByteArray payload;  // the body bytes this response carries
    qint64 sent = 0;     // payload bytes written so far
    qint64 limit = -1;   // stop after this many payload bytes (-1: none)
    bool drop_at_limit = false;
    bool endless = false;  // wrap around the payload forever
    bool responding = false;
    bool write_pending = false;  // a paced write is waiting on its timer
  };

  void acceptAll() {
    while (QTcpSocket* s = server_.nextPendingConnection()) {
      auto c = std::make_shared<Conn>();
      c->socket = s;
      conns_.append(c);
      QObject::connect(s, &QTcpSocket::readyRead, this, [this, c] { onRead(c); });
      QObject::connect(s, &QTcpSocket::bytesWritten, this, [this, c] { pump(c); });
      QObject::connect(s, &QTcpSocket::disconnected, s, &QObject::deleteLater);
    }
  }

  void onRead(const std::shared_ptr<Conn>& c) {
    if (!c->socket || c->responding) return;
    c->request += c->socket->readAll();
    const int end = c->request.indexOf("\r\n\r\n");
    if (end < 0) return;
    c->responding = true;
    respond(c, c->request.left(end));
  }

  static QByteArray header(const QList<QByteArray>& lines, const QByteArray& name) {
    for (const auto& l : lines) {
      const int colon = l.indexOf(':');
      if (colon > 0 && l.left(colon).trimmed().toLower() == name) return l.mid(colon + 1).trimmed();
    }
    return {};
  }

  void respond(const std::shared_ptr<Conn>& c, const QByteArray& head) {
    const QList<QByteArray> lines = head.split('\n');
    const QList<QByteArray> request_line = lines.value(0).trimmed().split(' ');
    const QByteArray path = request_line.value(1);
    const QByteArray range = header(lines, "range");
    range_headers_.append(QString::fromLatin1(range));
    const bool misbehave = !first_only_ || range_headers_.size() == 1;
    Mode mode = misbehave ? mode_ : Mode::Normal;
    qint64 at = at_;
    if (!script_.isEmpty()) {
      // Qt's HTTP layer may re-send a request whose connection closed early: a
      // repeat of the previous Range replays the previous step of the script.
      const qsizetype n = range_headers_.size();
      if (n == 1 || range_headers_[n - 1] != range_headers_[n - 2]) ++script_step_;
      mode = script_step_ < script_.size() ? script_[script_step_].first : Mode::Normal;
      at = script_step_ < script_.size() ? script_[script_step_].second : 0;
    }

    if (path == "/missing") {
      c->socket->write("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      c->socket->disconnectFromHost();
      return;
    }
    if (path == "/moved" || path == "/loop") {
      const QByteArray to = path == "/moved" ? QByteArray("/model.gguf") : path;
      c->socket->write("HTTP/1.1 302 Found\r\nLocation: " + to +
                       "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      c->socket->disconnectFromHost();
      return;
    }
    QByteArray content = body_;
    if (mode == Mode::WrongContent)
      for (qsizetype i = 0; i < content.size(); i += 97) content[i] = char(content[i] ^ 0x5a);

    qint64 start = 0;
    static const QRegularExpression kRange(QStringLiteral("^bytes=(\\d+)-$"));
    const auto m = kRange.match(QString::fromLatin1(range));
    const bool partial =
        m.hasMatch() && mode != Mode::IgnoreRange && mode != Mode::IgnoreRangeDrop && mode != Mode::Endless;
    if (partial) start = m.captured(1).toLongLong();
    if (partial && mode == Mode::ShiftedRange) start = std::max<qint64>(0, start - 100);
    if (partial && start >= content.size()) {
      c->socket->write(QStringLiteral("HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */%1\r\n"
                                      "Content-Length: 0\r\nConnection: close\r\n\r\n")
                           .arg(content.size())
                           .toLatin1());
      c->socket->disconnectFromHost();
      return;
    }
    c->payload = content.mid(start);
    QByteArray out;
    if (partial)
      out = QStringLiteral("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %1-%2/%3\r\n")
                .arg(start)
                .arg(content.size() - 1)
                .arg(content.size())
                .toLatin1();
    else
      out = "HTTP/1.1 200 OK\r\n";
    out += "Content-Type: application/octet-stream\r\nAccept-Ranges: bytes\r\nConnection: close\r\n";
    if (mode == Mode::Endless)  // the body ends when the connection does
      out += "\r\n";
    else
      out += "Content-Length: " + QByteArray::number(c->payload.size()) + "\r\n\r\n";
    c->socket->write(out);
    c->endless = mode == Mode::Endless;
    if (mode == Mode::Drop || mode == Mode::Stall || mode == Mode::IgnoreRangeDrop) {
      c->limit = at;
      c->drop_at_limit = mode != Mode::Stall;
    }
    pump(c);
  }

  // Writes the next chunk once the previous one has left (so pacing and the
  // drop/stall point are byte-exact), then closes when everything is sent.
  void pump(const std::shared_ptr<Conn>& c) {
    if (!c->socket || !c->responding || c->write_pending || c->socket->bytesToWrite() > 0) return;
    if (c->endless && c->sent >= c->payload.size()) c->sent = 0;
    const qint64 end = c->limit >= 0 ? std::min<qint64>(c->limit, c->payload.size()) : c->payload.size();
    if (c->sent >= end) {
      if (c->limit >= 0 && !c->drop_at_limit && c->sent < c->payload.size()) return;  // stall: keep open
      c->responding = false;
      // A drop closes early: the peer gets fewer bytes than Content-Length promised.
      c->socket->disconnectFromHost();
      return;
    }
    const qint64 n = std::min<qint64>(chunk_bytes_, end - c->sent);
    c->write_pending = true;
    auto write_chunk = [this, c, n] {
      c->write_pending = false;
      if (!c->socket) return;
      c->socket->write(c->payload.constData() + c->sent, n);
      c->sent += n;
      if (c->socket->bytesToWrite() == 0) pump(c);
    };
    if (delay_ms_ > 0)
      QTimer::singleShot(delay_ms_, this, write_chunk);
    else
      write_chunk();
  }

  QTcpServer server_;
  QByteArray body_;
  Mode mode_ = Mode::Normal;
  qint64 at_ = 0;
  bool first_only_ = true;
  int chunk_bytes_ = 16 * 1024;
  int delay_ms_ = 0;
  QList<QPair<Mode, qint64>> script_;
  qsizetype script_step_ = -1;
  QStringList range_headers_;
  QList<std::shared_ptr<Conn>> conns_;
};

}  // namespace moe::test
