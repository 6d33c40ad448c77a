// The downloads as a table: file, state in words, progress, speed, ETA and the
// error of a failed one, one row per download the DownloadManager knows, in
// queue order. Changes only on the GUI thread, from the manager's signals (the
// manager lives there): a row's figures change in place, rows come and go when
// downloads are added or cancelled.
#pragma once

#include <QAbstractTableModel>
#include <QList>

#include "app/qt/download_manager.h"

namespace moe {

class DownloadListModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { ColFile, ColState, ColProgress, ColSpeed, ColEta, ColError, ColCount };
  static constexpr int kIdRole = Qt::UserRole + 1;     // the download's id
  static constexpr int kStateRole = Qt::UserRole + 2;  // its state word: queued, running, ...

  explicit DownloadListModel(DownloadManager& downloads, QObject* parent = nullptr);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  qint64 idAt(int row) const;
  int rowOf(qint64 id) const;
  const DownloadStatus& statusAt(int row) const { return rows_.at(row); }

  // "Waiting", "Downloading", "Paused", "Checking the file", "Downloaded", "Failed".
  static QString stateWords(const QString& state);

 private:
  void reload();            // the rows from the manager (rows added or removed)
  void refresh(qint64 id);  // one row's figures

  DownloadManager& downloads_;
  QList<DownloadStatus> rows_;
};

}  // namespace moe
