// The model wizard's Hugging Face page: search the hub for GGUF repositories of
// the supported MoE architectures, open one to list its .gguf files with quant,
// size, checksum and the fit at the budget, choose one; Next downloads it like a
// catalog entry (size and SHA-256 checked).
#pragma once

#include <QList>
#include <QMap>
#include <QWizardPage>

#include "app/qt/hub_search.h"

class QLabel;
class QLineEdit;
class QPushButton;
class QTreeWidget;
class QTreeWidgetItem;

namespace moe {

class ModelWizard;

class HubSearchPage : public QWizardPage {
  Q_OBJECT

 public:
  enum Column { ColName, ColQuant, ColSize, ColFit, ColChecksum, ColCount };
  explicit HubSearchPage(ModelWizard& wizard);
  void initializePage() override;
  bool isComplete() const override;
  bool validatePage() override;

 private:
  void runSearch();
  void showRepos(const QList<HubRepo>& repos);
  void showFiles(const QString& repo_id, const QList<HubFile>& files);
  QTreeWidgetItem* repoItem(const QString& repo_id) const;
  const HubFile* selectedFile() const;

  ModelWizard& wizard_;
  HubSearch* hub_ = nullptr;
  QLineEdit* query_;
  QPushButton* search_;
  QTreeWidget* results_;
  QLabel* status_;
  QLabel* details_;
  QLabel* error_;
  QMap<QString, HubRepo> repos_;
  QMap<QString, QList<HubFile>> files_;  // by repository, once listed
};

}  // namespace moe
