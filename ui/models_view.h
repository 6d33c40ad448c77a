// The models view: every model the user has (the demo model once, registered
// files, GGUF files in the models folder) with its name, architecture, quant,
// size, context, location, predictor and whether it fits the VRAM budget; Load
// one; Remove one from the list (a file added where it was: the file stays); or
// Delete one's file and its trained predictor, after a confirmation naming the
// path whose default answer is Cancel.
// The list and the removal come from app/core (InstalledModel) through the
// functions it is given.
#pragma once

#include <QDialog>
#include <functional>
#include <vector>

#include "app/core/installed_models.h"

class QLabel;
class QPushButton;
class QTableWidget;

namespace moe {

class ModelsView : public QDialog {
  Q_OBJECT

 public:
  enum Column {
    ColName,
    ColArch,
    ColQuant,
    ColSize,
    ColContext,
    ColLocation,
    ColPredictor,
    ColFit,
    ColCount
  };
  using Source = std::function<std::vector<InstalledModel>()>;
  using Remover = std::function<std::string(const InstalledModel&)>;  // the error, empty on success
  using Forgetter = Remover;  // takes it off the list, the file untouched
  using Confirm = std::function<bool(const QString& question)>;

  // fit_heading: the fit column's header (fitHeading(): "Fits 24.00 GB?", "Fits? (no
  // GPU: runs on the CPU)").
  ModelsView(Source source, Remover remover, Forgetter forgetter, const QString& fit_heading,
             QWidget* parent = nullptr);

  void reload();
  void setFitHeading(const QString& heading);
  QTableWidget* table() const { return table_; }
  const std::vector<InstalledModel>& models() const { return models_; }
  // Asked before a file is deleted (a message box whose default is Cancel unless
  // set; tests answer it).
  void setConfirm(Confirm confirm) { confirm_ = std::move(confirm); }
  void removeSelected();  // deletes the selected model's file, once confirmed
  void forgetSelected();  // takes it off the list

 signals:
  void loadRequested(const QString& name, const QString& path);  // path empty: the demo model
  void modelRemoved(const QString& path);

 private:
  void updateButtons();
  int selectedRow() const;

  Source source_;
  Remover remover_;
  Forgetter forgetter_;
  Confirm confirm_;
  std::vector<InstalledModel> models_;
  QTableWidget* table_ = nullptr;
  QPushButton* load_ = nullptr;
  QPushButton* forget_ = nullptr;
  QPushButton* remove_ = nullptr;
  QLabel* status_ = nullptr;
};

}  // namespace moe
