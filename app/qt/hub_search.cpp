#include "app/qt/hub_search.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkReply>
#include <QRegularExpression>
#include <QUrlQuery>
#include <algorithm>

namespace moe {
namespace {

constexpr int kSearchLimit = 40;
constexpr int kTimeoutMs = 20000;

QJsonDocument parse(const QByteArray& json, const char* what) {
  QJsonParseError err;
  QJsonDocument doc = QJsonDocument::fromJson(json, &err);
  if (doc.isNull())
    throw CatalogError(QStringLiteral("hub %1: not JSON (%2)").arg(what, err.errorString()).toStdString());
  return doc;
}

}  // namespace

QString HubFile::fileName() const { return path.section('/', -1); }

CatalogEntry HubFile::toCatalogEntry(const QUrl& base, const HubRepo& repo) const {
  CatalogEntry e;
  e.id = QStringLiteral("hub:%1/%2").arg(this->repo, path);
  e.name = QStringLiteral("%1 (%2)").arg(repo.id.section('/', -1), quant.isEmpty() ? fileName() : quant);
  e.family = repo.family;
  e.quant = quant;
  e.shape = repo.shape;
  QUrl url = base;
  url.setPath(QStringLiteral("/%1/resolve/main/%2").arg(this->repo, path));
  e.url = url.toString();
  e.sha256 = sha256;
  e.size_bytes = size_bytes;
  e.licence = QStringLiteral("see the repository's model card");
  e.needs = QStringLiteral("from the Hugging Face hub: %1").arg(this->repo);
  return e;
}

void recogniseShape(const QString& repo_id, QString* family, QString* shape) {
  // The supported MoE models by the names their repositories carry: the shapes
  // of shared/MODEL-SHAPES.md first, then the families without a size preset.
  struct Known {
    const char* pattern;
    const char* family;
    const char* shape;
  };
  static const Known kKnown[] = {
      // Qwen3.5 / Qwen3.6 before Qwen3's patterns, which their names also match.
      {"qwen3[-_.]?[56][-_.]?35b[-_.]?a3b", "qwen35moe", "Q3.6-35B"},
      {"qwen3[-_.]?5[-_.]?122b[-_.]?a10b", "qwen35moe", "Q3.5-122B"},
      {"qwen3[-_.]?[56][-_.].*a\\d+b", "qwen35moe", ""},
      {"qwen3[-_.]?235b[-_.]?a22b", "qwen3moe", "Q3-235B"},
      {"qwen3[-_.]?(coder[-_.]?)?30b[-_.]?a3b", "qwen3moe", "Q3-30B"},
      {"qwen2[-_.]?57b[-_.]?a14b", "qwen2moe", "QW-2"},
      {"qwen1[-_.]?5[-_.]?moe[-_.]?a2[-_.]?7b", "qwen2moe", "QW-1"},
      {"mixtral[-_.]?8x7b", "llama", "Mixt"},
      {"olmoe", "olmoe", "OLMoE"},
      {"deepseek[-_.]?moe[-_.]?16b", "deepseek", "DS-1"},
      {"gpt[-_.]?oss[-_.]?120b", "gpt-oss", "OSS-120B"},
      {"gpt[-_.]?oss[-_.]?20b", "gpt-oss", "OSS-20B"},
      {"glm[-_.]?4\\.5[-_.]?air", "glm4moe", "GLM-Air"},
      {"qwen3[-_.].*a\\d+b", "qwen3moe", ""},
      {"qwen1[-_.]?5[-_.]?moe|qwen2[-_.]?moe", "qwen2moe", ""},
      {"mixtral", "llama", ""},
      {"deepseek[-_.]?moe", "deepseek", ""},
      {"glm[-_.]?4\\.[56]", "glm4moe", ""},  // GLM-4.7-Flash is deepseek2 (MLA): not yet
  };
  family->clear();
  shape->clear();
  const QString id = repo_id.toLower();
  for (const Known& k : kKnown)
    if (QRegularExpression(QString::fromLatin1(k.pattern)).match(id).hasMatch()) {
      *family = QString::fromLatin1(k.family);
      *shape = QString::fromLatin1(k.shape);
      return;
    }
}

QString quantFromFileName(const QString& file_name) {
  static const QRegularExpression re(
      QStringLiteral("(?:^|[-_.])([IT]?Q[1-8](?:_[0-9A-Z]+)*|F16|F32|BF16)(?=[-_.])"),
      QRegularExpression::CaseInsensitiveOption);
  QString found;
  auto it = re.globalMatch(file_name);
  while (it.hasNext()) found = it.next().captured(1);  // the last one: "model-7b-Q4_K_M.gguf"
  return found.toUpper();
}

bool engineRunsQuant(const QString& quant) {
  // The quants of quant::kComputeTypes as file names label them (K-quant mixes by
  // their _S/_M/_L/_XL variants, the grid-coded IQ1/IQ2/IQ3 files and their llama-quantize
  // mixes, Unsloth's dynamic "UD-" mixes of the same types); the ternary TQ types are not
  // computed.
  static const QStringList kRuns = {
      "F32",     "F16",     "BF16",    "Q8_0",    "Q4_0",   "Q4_1",   "Q5_0",    "Q5_1",
      "IQ4_NL",  "IQ4_XS",  "MXFP4",   "Q2_K",    "Q2_K_S", "Q2_K_L", "Q3_K_S",  "Q3_K_M",
      "Q3_K_L",  "Q4_K_S",  "Q4_K_M",  "Q5_K_S",  "Q5_K_M", "Q6_K",   "Q4_K_XL", "Q5_K_XL",
      "Q6_K_XL", "Q8_K_XL", "Q2_K_XL", "Q3_K_XL", "IQ1_S",  "IQ1_M",  "IQ2_XXS", "IQ2_XS",
      "IQ2_S",   "IQ2_M",   "IQ3_XXS", "IQ3_XS",  "IQ3_S",  "IQ3_M"};
  QString q = quant.toUpper();
  if (q.startsWith("UD-")) q = q.mid(3);
  return kRuns.contains(q);
}

QList<HubRepo> parseHubSearch(const QByteArray& json) {
  const QJsonDocument doc = parse(json, "search");
  if (!doc.isArray()) throw CatalogError("hub search: the answer is not a list of models");
  QList<HubRepo> out;
  for (const QJsonValue& v : doc.array()) {
    const QJsonObject o = v.toObject();
    HubRepo r;
    r.id = o.value(QStringLiteral("id")).toString(o.value(QStringLiteral("modelId")).toString());
    if (r.id.isEmpty() || !r.id.contains('/')) continue;
    r.downloads = qint64(o.value(QStringLiteral("downloads")).toDouble());
    r.likes = qint64(o.value(QStringLiteral("likes")).toDouble());
    recogniseShape(r.id, &r.family, &r.shape);
    out << r;
  }
  // Supported MoE repositories first (they keep the hub's order among themselves).
  std::stable_sort(out.begin(), out.end(), [](const HubRepo& a, const HubRepo& b) {
    return !a.family.isEmpty() && b.family.isEmpty();
  });
  return out;
}

QList<HubFile> parseHubTree(const QString& repo, const QByteArray& json) {
  const QJsonDocument doc = parse(json, "file list");
  if (!doc.isArray()) throw CatalogError("hub file list: the answer is not a list of files");
  static const QRegularExpression split(QStringLiteral("-(\\d{5})-of-(\\d{5})\\.gguf$"),
                                        QRegularExpression::CaseInsensitiveOption);
  static const QRegularExpression hex64(QStringLiteral("^[0-9a-f]{64}$"));
  QList<HubFile> out;
  for (const QJsonValue& v : doc.array()) {
    const QJsonObject o = v.toObject();
    if (o.value(QStringLiteral("type")).toString() != QStringLiteral("file")) continue;
    HubFile f;
    f.repo = repo;
    f.path = o.value(QStringLiteral("path")).toString();
    if (!f.path.endsWith(QStringLiteral(".gguf"), Qt::CaseInsensitive)) continue;
    const QJsonObject lfs = o.value(QStringLiteral("lfs")).toObject();
    const QJsonValue size = lfs.contains(QStringLiteral("size")) ? lfs.value(QStringLiteral("size"))
                                                                 : o.value(QStringLiteral("size"));
    f.size_bytes = size.isDouble() ? qint64(size.toDouble()) : -1;
    const QString oid = lfs.value(QStringLiteral("oid")).toString().toLower();
    if (hex64.match(oid).hasMatch()) f.sha256 = oid;
    f.quant = quantFromFileName(f.fileName());
    const auto m = split.match(f.path);
    if (m.hasMatch()) {
      if (m.captured(1).toInt() != 1) continue;  // one row per split model: its first part
      f.split_parts = m.captured(2).toInt();
    }
    out << f;
  }
  return out;
}

HubSearch::HubSearch(QUrl base, QObject* parent) : QObject(parent), base_(std::move(base)) {}

QNetworkReply* HubSearch::get(const QUrl& url) {
  QNetworkRequest req(url);
  req.setHeader(QNetworkRequest::UserAgentHeader, QStringLiteral("moechat"));
  req.setTransferTimeout(kTimeoutMs);
  return nam_.get(req);
}

void HubSearch::search(const QString& query) {
  if (search_reply_) search_reply_->abort();  // a newer search replaces it
  QUrl url = base_;
  url.setPath(QStringLiteral("/api/models"));
  QUrlQuery q;
  q.addQueryItem(QStringLiteral("search"), query.trimmed());
  q.addQueryItem(QStringLiteral("filter"), QStringLiteral("gguf"));
  q.addQueryItem(QStringLiteral("sort"), QStringLiteral("downloads"));
  q.addQueryItem(QStringLiteral("direction"), QStringLiteral("-1"));
  q.addQueryItem(QStringLiteral("limit"), QString::number(kSearchLimit));
  url.setQuery(q);
  QNetworkReply* reply = get(url);
  search_reply_ = reply;
  connect(reply, &QNetworkReply::finished, this, [this, reply] {
    reply->deleteLater();
    if (reply->error() == QNetworkReply::OperationCanceledError && reply != search_reply_) return;
    if (reply->error() != QNetworkReply::NoError) {
      emit failed(QStringLiteral("The Hugging Face search failed: %1").arg(reply->errorString()));
      return;
    }
    try {
      emit reposFound(parseHubSearch(reply->readAll()));
    } catch (const std::exception& e) {
      emit failed(QString::fromUtf8(e.what()));
    }
  });
}

void HubSearch::listFiles(const QString& repo_id) {
  QUrl url = base_;
  url.setPath(QStringLiteral("/api/models/%1/tree/main").arg(repo_id));
  url.setQuery(QStringLiteral("recursive=true"));  // files in subfolders too (split models sit in one)
  QNetworkReply* reply = get(url);
  connect(reply, &QNetworkReply::finished, this, [this, reply, repo_id] {
    reply->deleteLater();
    if (reply->error() != QNetworkReply::NoError) {
      emit failed(QStringLiteral("Could not list the files of %1: %2").arg(repo_id, reply->errorString()));
      return;
    }
    try {
      emit filesFound(repo_id, parseHubTree(repo_id, reply->readAll()));
    } catch (const std::exception& e) {
      emit failed(QString::fromUtf8(e.what()));
    }
  });
}

}  // namespace moe
