// The downloads view: every download the manager knows (waiting, running,
// paused, failed, done) with its progress, speed, ETA and error; Pause / Resume,
// Retry a failed one, Cancel one (its partial file is deleted). Lives as long as
// its window; the manager goes on without it.
#pragma once

#include <QDialog>
#include <QLabel>

class QPushButton;
class QTableView;

namespace moe {

class DownloadManager;
class DownloadListModel;

class DownloadsView : public QDialog {
  Q_OBJECT

 public:
  explicit DownloadsView(DownloadManager& downloads, QWidget* parent = nullptr);

  QTableView* table() const { return table_; }
  DownloadListModel* model() const { return model_; }

 private:
  qint64 selectedId() const;
  QString selectedState() const;
  void updateButtons();

  DownloadManager& downloads_;
  DownloadListModel* model_ = nullptr;
  QTableView* table_ = nullptr;
  QPushButton* pause_ = nullptr;
  QPushButton* retry_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QLabel* reason_ = nullptr;  // the selected failed download's reason, in full (the cell elides it)
};

}  // namespace moe
