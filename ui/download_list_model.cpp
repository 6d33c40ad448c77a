#include "ui/download_list_model.h"

#include <QFileInfo>

#include "app/qt/model_catalog.h"
#include "ui/model_wizard_pages.h"

namespace moe {

DownloadListModel::DownloadListModel(DownloadManager& downloads, QObject* parent)
    : QAbstractTableModel(parent), downloads_(downloads) {
  rows_ = downloads_.downloads();
  connect(&downloads_, &DownloadManager::added, this, [this](qint64) { reload(); });
  connect(&downloads_, &DownloadManager::stateChanged, this, [this](qint64 id, const QString& state) {
    if (state == QStringLiteral("cancelled") || rowOf(id) < 0)
      reload();
    else
      refresh(id);
  });
  connect(&downloads_, &DownloadManager::progress, this, [this](qint64 id) { refresh(id); });
  connect(&downloads_, &DownloadManager::retrying, this, [this](qint64 id) { refresh(id); });
  connect(&downloads_, &DownloadManager::failed, this, [this](qint64 id) { refresh(id); });
}

int DownloadListModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(rows_.size());
}
int DownloadListModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColCount;
}

qint64 DownloadListModel::idAt(int row) const { return row >= 0 && row < rows_.size() ? rows_[row].id : 0; }

int DownloadListModel::rowOf(qint64 id) const {
  for (int r = 0; r < rows_.size(); ++r)
    if (rows_[r].id == id) return r;
  return -1;
}

QString DownloadListModel::stateWords(const QString& state) {
  static const QHash<QString, QString> kWords = {
      {QStringLiteral("queued"), QStringLiteral("Waiting")},
      {QStringLiteral("running"), QStringLiteral("Downloading")},
      {QStringLiteral("paused"), QStringLiteral("Paused")},
      {QStringLiteral("verifying"), QStringLiteral("Checking the file")},
      {QStringLiteral("done"), QStringLiteral("Downloaded")},
      {QStringLiteral("failed"), QStringLiteral("Failed")}};
  return kWords.value(state, state);
}

QVariant DownloadListModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rows_.size()) return {};
  const DownloadStatus& s = rows_[index.row()];
  if (role == kIdRole) return s.id;
  if (role == kStateRole) return s.state;
  if (role == Qt::ToolTipRole) {
    if (index.column() == ColFile) return QStringLiteral("%1\nfrom %2").arg(s.dest, s.url.toString());
    if (index.column() == ColError) return s.error;
    return {};
  }
  if (role == Qt::TextAlignmentRole && index.column() != ColFile && index.column() != ColError)
    return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  const bool running = s.state == QStringLiteral("running");
  switch (index.column()) {
    case ColFile: return QFileInfo(s.dest).fileName();
    case ColState:
      return s.state == QStringLiteral("running") && s.attempt > 0
                 ? QStringLiteral("Retrying (attempt %1)").arg(s.attempt)
                 : stateWords(s.state);
    case ColProgress:
      if (s.total > 0)
        return QStringLiteral("%1 of %2 (%3%)")
            .arg(humanBytes(uint64_t(s.bytes_done)), humanBytes(uint64_t(s.total)))
            .arg(int(100.0 * double(s.bytes_done) / double(s.total)));
      return s.bytes_done > 0 ? humanBytes(uint64_t(s.bytes_done)) : QStringLiteral("–");
    case ColSpeed: return running ? speedText(s.bytes_per_sec, true) : QStringLiteral("–");
    case ColEta: return running ? etaText(s.eta_s) : QStringLiteral("–");
    case ColError: return s.state == QStringLiteral("failed") ? s.error : QString();
    default: return {};
  }
}

QVariant DownloadListModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* kNames[] = {"File", "State", "Progress", "Speed", "ETA", "Error"};
  return section >= 0 && section < ColCount ? QString(kNames[section]) : QVariant();
}

void DownloadListModel::reload() {
  beginResetModel();
  rows_ = downloads_.downloads();
  endResetModel();
}

void DownloadListModel::refresh(qint64 id) {
  const int row = rowOf(id);
  if (row < 0) return reload();
  const DownloadStatus st = downloads_.status(id);
  if (st.id == 0) return reload();
  rows_[row] = st;
  emit dataChanged(index(row, 0), index(row, ColCount - 1));
}

}  // namespace moe
