#include "ui/models_view.h"

#include <QDialogButtonBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include "app/core/fit_words.h"

namespace moe {
namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

ModelsView::ModelsView(Source source, Remover remover, Forgetter forgetter, const QString& fit_heading,
                       QWidget* parent)
    : QDialog(parent),
      source_(std::move(source)),
      remover_(std::move(remover)),
      forgetter_(std::move(forgetter)) {
  setWindowTitle("Models");
  setObjectName("modelsView");
  table_ = new QTableWidget(0, ColCount, this);
  table_->setObjectName("modelsTable");
  table_->setHorizontalHeaderLabels(
      {"Name", "Architecture", "Quant", "Size", "Context", "Location", "Predictor", fit_heading});
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setWordWrap(false);
  table_->setTextElideMode(Qt::ElideMiddle);  // long paths keep their file name

  load_ = new QPushButton("Load", this);
  load_->setObjectName("loadModelButton");
  forget_ = new QPushButton("Remove from list", this);
  forget_->setObjectName("forgetModelButton");
  forget_->setAutoDefault(false);
  remove_ = new QPushButton("Delete file…", this);
  remove_->setObjectName("deleteModelFileButton");
  remove_->setAutoDefault(false);
  status_ = new QLabel(this);
  status_->setObjectName("modelsStatus");
  status_->setWordWrap(true);
  auto* close = new QDialogButtonBox(QDialogButtonBox::Close, this);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(load_);
  buttons->addWidget(forget_);
  buttons->addWidget(remove_);
  buttons->addWidget(status_, 1);
  buttons->addWidget(close);
  auto* v = new QVBoxLayout(this);
  v->addWidget(table_, 1);
  v->addLayout(buttons);

  connect(close, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(table_, &QTableWidget::itemSelectionChanged, this, &ModelsView::updateButtons);
  connect(load_, &QPushButton::clicked, this, [this] {
    const int row = selectedRow();
    if (row < 0) return;
    emit loadRequested(q(models_[size_t(row)].name), q(models_[size_t(row)].path));
  });
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
    if (row >= 0 && size_t(row) < models_.size() && models_[size_t(row)].readable)
      emit loadRequested(q(models_[size_t(row)].name), q(models_[size_t(row)].path));
  });
  connect(forget_, &QPushButton::clicked, this, &ModelsView::forgetSelected);
  connect(remove_, &QPushButton::clicked, this, &ModelsView::removeSelected);
  confirm_ = [this](const QString& question) {
    QMessageBox box(QMessageBox::Warning, "Delete a model file", question, QMessageBox::NoButton, this);
    QPushButton* del = box.addButton("Delete the file", QMessageBox::DestructiveRole);
    QPushButton* cancel = box.addButton(QMessageBox::Cancel);
    box.setDefaultButton(cancel);  // Enter never deletes
    box.setEscapeButton(cancel);
    box.exec();
    return box.clickedButton() == del;
  };
  reload();
  resize(1000, 420);
}

void ModelsView::reload() {
  models_ = source_ ? source_() : std::vector<InstalledModel>{};
  table_->setRowCount(0);
  for (const InstalledModel& m : models_) {
    const int row = table_->rowCount();
    table_->insertRow(row);
    auto set = [&](int col, const QString& text, const QString& tip = {}) {
      auto* item = new QTableWidgetItem(text);
      item->setToolTip(tip.isEmpty() ? text : tip);
      if (col == ColSize || col == ColContext) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      table_->setItem(row, col, item);
    };
    set(ColName, q(m.name));
    set(ColArch, q(m.architecture));
    set(ColQuant, q(m.quant));
    set(ColSize, m.size_bytes ? q(formatBytes(m.size_bytes)) : QString("–"));
    set(ColContext, m.n_ctx > 0 ? QString::number(m.n_ctx) : QString("–"));
    set(ColLocation, m.demo ? QString("built in") : q(m.path));
    set(ColPredictor, m.predictor.empty() ? QString("none") : q(m.predictor),
        m.predictor.empty() ? QString("No trained predictor (File > Train a predictor)")
                            : QString("Mean validation Accuracy of its trained predictor"));
    set(ColFit, q(m.fit), q(m.fit_detail));
  }
  table_->resizeColumnsToContents();
  for (int c = 0; c < ColCount; ++c)
    table_->setColumnWidth(c, std::min(table_->columnWidth(c), c == ColLocation ? 240 : 220));
  updateButtons();
}

void ModelsView::setFitHeading(const QString& heading) {
  table_->setHorizontalHeaderItem(ColFit, new QTableWidgetItem(heading));
}

int ModelsView::selectedRow() const {
  const auto rows = table_->selectionModel()->selectedRows();
  return rows.isEmpty() ? -1 : rows.front().row();
}

void ModelsView::updateButtons() {
  const int row = selectedRow();
  const bool any = row >= 0 && size_t(row) < models_.size();
  load_->setEnabled(any && models_[size_t(row)].readable);
  const bool demo = any && models_[size_t(row)].demo;
  remove_->setEnabled(any && !demo);
  remove_->setToolTip(demo ? "The demo model is built in"
                           : "Deletes the file and the predictor trained for it");
  const bool in_folder = any && models_[size_t(row)].in_models_folder;
  forget_->setEnabled(any && !demo && !in_folder && models_[size_t(row)].registry_id != 0);
  forget_->setToolTip(demo ? "The demo model is built in"
                      : in_folder
                          ? "Files in the models folder are always listed: move the file out, or delete it"
                          : "Takes the model off this list; the file stays where it is");
}

void ModelsView::forgetSelected() {
  const int row = selectedRow();
  if (row < 0 || size_t(row) >= models_.size() || models_[size_t(row)].demo) return;
  const InstalledModel m = models_[size_t(row)];
  const std::string error = forgetter_ ? forgetter_(m) : std::string("nothing can change the list here");
  if (!error.empty()) {
    status_->setText("Not removed from the list: " + q(error));
    return;
  }
  status_->setText(QString("Removed %1 from the list; the file is still at %2.").arg(q(m.name), q(m.path)));
  emit modelRemoved(q(m.path));
  reload();
}

void ModelsView::removeSelected() {
  const int row = selectedRow();
  if (row < 0 || size_t(row) >= models_.size() || models_[size_t(row)].demo) return;
  const InstalledModel m = models_[size_t(row)];
  QString question =
      QString("Delete the file %1 (%2) from this computer?").arg(q(m.path), q(formatBytes(m.size_bytes)));
  if (!m.in_models_folder)
    question += " It is outside the models folder: it was added where it was, and may be used elsewhere.";
  if (!m.predictor.empty()) question += " Its trained predictor is deleted too.";
  if (confirm_ && !confirm_(question)) return;
  const std::string error = remover_ ? remover_(m) : std::string("nothing can remove models here");
  if (!error.empty()) {
    status_->setText("Not removed: " + q(error));
    return;
  }
  status_->setText(QString("Deleted %1.").arg(q(m.path)));
  emit modelRemoved(q(m.path));
  reload();
}

}  // namespace moe
