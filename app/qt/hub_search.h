// Finding GGUF files of the supported MoE architectures on the Hugging Face hub,
// through its public HTTP API: a search (GET /api/models?search=...&filter=gguf)
// lists repositories; a repository's file tree (GET /api/models/<repo>/tree/main)
// gives each .gguf file with its size and the SHA-256 of its LFS object, so a
// download is verified like a catalog entry. The model's shape is recognised from
// the repository's name (shared/MODEL-SHAPES.md presets), so the fit at the budget
// is estimated before a byte is downloaded. The base URL is injectable: tests
// serve recorded responses from a local server.
#pragma once

#include <QList>
#include <QNetworkAccessManager>
#include <QObject>
#include <QPointer>
#include <QString>
#include <QUrl>

#include "app/qt/model_catalog.h"

class QNetworkReply;

namespace moe {

struct HubRepo {
  QString id;  // "Qwen/Qwen3-30B-A3B-GGUF"
  qint64 downloads = 0;
  qint64 likes = 0;
  QString family;  // the architecture it was recognised as ("qwen3moe"), empty: not a supported MoE
  QString shape;   // the size preset ("Q3-30B"), empty when unknown
};

struct HubFile {
  QString repo, path;  // path inside the repository
  qint64 size_bytes = -1;
  QString sha256;       // of the LFS object; empty when the hub gave none
  QString quant;        // from the file name ("Q4_K_M"), empty when not named
  int split_parts = 1;  // "-00001-of-00003.gguf": 3 (only whole files are downloaded)
  QString fileName() const;
  // The file as a catalog entry (url under base, checksum, size, shape from the repo).
  CatalogEntry toCatalogEntry(const QUrl& base, const HubRepo& repo) const;
};

// Parsers of the hub's JSON (throw CatalogError on a document that is not what the API returns).
QList<HubRepo> parseHubSearch(const QByteArray& json);
QList<HubFile> parseHubTree(const QString& repo, const QByteArray& json);
// The architecture and size preset of a repository, from its name ("" when none is recognised).
void recogniseShape(const QString& repo_id, QString* family, QString* shape);
// "Q4_K_M" from "qwen3-30b-a3b-q4_k_m.gguf"; "" when the name carries none.
QString quantFromFileName(const QString& file_name);
// Whether this engine computes a file of that quant ("Q4_K_M", "IQ4_XS" yes, "IQ2_XXS" no).
bool engineRunsQuant(const QString& quant);

class HubSearch : public QObject {
  Q_OBJECT

 public:
  explicit HubSearch(QUrl base = QUrl(QStringLiteral("https://huggingface.co")), QObject* parent = nullptr);
  const QUrl& base() const { return base_; }

  // Searches GGUF repositories; answers with reposFound (supported MoE ones first) or failed.
  void search(const QString& query);
  // Lists a repository's .gguf files; answers with filesFound or failed.
  void listFiles(const QString& repo_id);

 signals:
  void reposFound(const QList<moe::HubRepo>& repos);
  void filesFound(const QString& repo_id, const QList<moe::HubFile>& files);
  void failed(const QString& why);

 private:
  QNetworkReply* get(const QUrl& url);

  QUrl base_;
  QNetworkAccessManager nam_;
  QPointer<QNetworkReply> search_reply_;
};

}  // namespace moe
