// The three pages of ModelWizard. Widgets carry object names so tests (and
// accessibility tools) can find them.
#pragma once

#include <QWizardPage>

class QButtonGroup;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QRadioButton;
class QTreeWidget;

namespace moe {

class ModelWizard;

// Catalog | Hugging Face search (the next page) | URL | local file. validatePage()
// starts the download or installs the file.
class ChooseModelPage : public QWizardPage {
  Q_OBJECT

 public:
  explicit ChooseModelPage(ModelWizard& wizard);
  bool validatePage() override;
  bool isComplete() const override;

 private:
  void fillCatalog();
  void showError(const QString& message);  // under the chosen section
  void hideErrors();
  bool chooseCatalog();
  bool chooseUrl();
  bool chooseLocal();

  ModelWizard& wizard_;
  QRadioButton *catalog_radio_, *hub_radio_, *url_radio_, *local_radio_;
  QTreeWidget* catalog_list_;
  QLineEdit *url_edit_, *sha_edit_, *local_edit_;
  QPushButton* browse_;
  QLabel* details_;      // the selected catalog entry: needs, fit, size, checksum, licence
  QLabel* error_label_;  // the catalog's
  QLabel* url_error_;    // under the URL and SHA-256 fields
  QLabel* local_error_;  // under the local file field
};

// Progress of the wizard's download; complete when the file is verified and registered.
class DownloadModelPage : public QWizardPage {
  Q_OBJECT

 public:
  explicit DownloadModelPage(ModelWizard& wizard);
  void initializePage() override;
  bool isComplete() const override { return done_; }

 private:
  void onProgress(qint64 id, qint64 done, qint64 total, double bytes_per_sec, qint64 eta_s);
  void onState(qint64 id, const QString& state);
  void togglePause();

  ModelWizard& wizard_;
  QLabel *title_, *state_label_, *speed_label_, *eta_label_, *error_label_;
  QProgressBar* progress_;
  QPushButton* pause_button_;
  bool done_ = false;
};

class InstalledModelPage : public QWizardPage {
  Q_OBJECT

 public:
  explicit InstalledModelPage(ModelWizard& wizard);
  void initializePage() override;

 private:
  ModelWizard& wizard_;
  QLabel* path_label_;
};

// "12.3 MB/s", "0 B/s (stalled)"; "ETA 1:02:03", "ETA unknown".
QString speedText(double bytes_per_sec, bool running);
QString etaText(qint64 eta_s);

}  // namespace moe
