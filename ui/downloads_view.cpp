#include "ui/downloads_view.h"

#include <QDialogButtonBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>

#include "app/qt/download_manager.h"
#include "ui/download_list_model.h"

namespace moe {

DownloadsView::DownloadsView(DownloadManager& downloads, QWidget* parent)
    : QDialog(parent), downloads_(downloads) {
  setWindowTitle("Downloads");
  setObjectName("downloadsView");
  model_ = new DownloadListModel(downloads_, this);
  table_ = new QTableView(this);
  table_->setObjectName("downloadsTable");
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setWordWrap(false);
  table_->setColumnWidth(DownloadListModel::ColFile, 260);
  table_->setColumnWidth(DownloadListModel::ColState, 140);
  table_->setColumnWidth(DownloadListModel::ColProgress, 200);

  pause_ = new QPushButton("Pause", this);
  pause_->setObjectName("pauseDownload");
  retry_ = new QPushButton("Retry", this);
  retry_->setObjectName("retryDownload");
  cancel_ = new QPushButton("Cancel download", this);
  cancel_->setObjectName("cancelDownload");
  cancel_->setToolTip("Stops the download and deletes what it downloaded so far");
  auto* empty = new QLabel("No downloads. Add a model with File > Add a model.", this);
  empty->setObjectName("noDownloads");
  auto* close = new QDialogButtonBox(QDialogButtonBox::Close, this);
  reason_ = new QLabel(this);
  reason_->setObjectName("failureReason");
  reason_->setWordWrap(true);
  reason_->setTextFormat(Qt::PlainText);
  reason_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  reason_->hide();

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(pause_);
  buttons->addWidget(retry_);
  buttons->addWidget(cancel_);
  buttons->addStretch(1);
  buttons->addWidget(close);
  auto* v = new QVBoxLayout(this);
  v->addWidget(empty);
  v->addWidget(table_, 1);
  v->addWidget(reason_);
  v->addLayout(buttons);

  auto refresh = [this, empty] {
    empty->setVisible(model_->rowCount() == 0);
    updateButtons();
  };
  connect(close, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this, refresh);
  connect(model_, &QAbstractItemModel::dataChanged, this, refresh);
  connect(model_, &QAbstractItemModel::modelReset, this, refresh);
  connect(pause_, &QPushButton::clicked, this, [this] {
    const qint64 id = selectedId();
    if (selectedState() == QStringLiteral("paused"))
      downloads_.resume(id);
    else
      downloads_.pause(id);
  });
  connect(retry_, &QPushButton::clicked, this, [this] { downloads_.resume(selectedId()); });
  connect(cancel_, &QPushButton::clicked, this, [this] { downloads_.cancel(selectedId()); });
  refresh();
  resize(900, 360);
}

qint64 DownloadsView::selectedId() const {
  const auto rows = table_->selectionModel()->selectedRows();
  return rows.isEmpty() ? 0 : model_->idAt(rows.front().row());
}

QString DownloadsView::selectedState() const {
  const auto rows = table_->selectionModel()->selectedRows();
  return rows.isEmpty() ? QString() : model_->statusAt(rows.front().row()).state;
}

void DownloadsView::updateButtons() {
  const QString s = selectedState();
  const bool active = s == QStringLiteral("queued") || s == QStringLiteral("running");
  pause_->setText(s == QStringLiteral("paused") ? "Resume" : "Pause");
  pause_->setEnabled(active || s == QStringLiteral("paused"));
  retry_->setEnabled(s == QStringLiteral("failed"));
  const auto rows = table_->selectionModel()->selectedRows();
  const QString why = s == QStringLiteral("failed") && !rows.isEmpty()
                          ? model_->statusAt(rows.front().row()).error
                          : QString();
  reason_->setText(why.isEmpty() ? QString() : "Why it failed: " + why);
  reason_->setVisible(!why.isEmpty());
  cancel_->setEnabled(!s.isEmpty() && s != QStringLiteral("done") && s != QStringLiteral("verifying"));
}

}  // namespace moe
