#include "ui/model_wizard.h"

#include <QDir>
#include <QFileInfo>
#include <QUrl>

#include "app/core/fit_words.h"
#include "app/core/model_registry.h"
#include "app/qt/download_manager.h"
#include "app/qt/download_verify.h"
#include "app/qt/file_hasher.h"
#include "ui/model_wizard_hub_page.h"
#include "ui/model_wizard_pages.h"

namespace moe {

ModelWizard::ModelWizard(DownloadManager& downloads, ModelRegistry& registry, const ModelCatalog& catalog,
                         const PlanRequest& plan_request, const DeviceMemory& device,
                         const QString& models_dir, QWidget* parent)
    : QWizard(parent),
      downloads_(downloads),
      registry_(registry),
      catalog_(catalog),
      plan_request_(plan_request),
      device_(device),
      models_dir_(models_dir) {
  setWindowTitle(tr("Add a model"));
  setPage(ChoosePage, new ChooseModelPage(*this));
  setPage(DownloadPage, new DownloadModelPage(*this));
  setPage(DonePage, new InstalledModelPage(*this));
  setPage(HubPage, new HubSearchPage(*this));
  setStartId(ChoosePage);
  setOption(QWizard::NoBackButtonOnLastPage);
  setOption(QWizard::NoBackButtonOnStartPage);
  resize(980, 680);  // the catalog table shows every row and its fit without scrolling
}

ModelWizard::~ModelWizard() { hash_.cancelAndWait(); }

QString ModelWizard::fitHeading() const {
  return QString::fromStdString(moe::fitHeading(plan_request_.budget, device_));
}

QString ModelWizard::fitFor() const {
  return tr("Fit shown for %1.").arg(QString::fromStdString(budgetPhrase(plan_request_.budget, device_)));
}

int ModelWizard::nextId() const {
  switch (currentId()) {
    case ChoosePage: return hub_ ? HubPage : local_ ? DonePage : DownloadPage;
    case HubPage: return DownloadPage;
    case DownloadPage: return DonePage;
    default: return -1;
  }
}

QString ModelWizard::startDownload(const QUrl& url, const QString& file_name, const QString& sha256,
                                   qint64 size, const QString& catalog_id) {
  if (!QDir().mkpath(models_dir_)) return tr("Cannot create the models folder %1.").arg(models_dir_);
  const QString dest = QDir(models_dir_).filePath(file_name);
  if (QFileInfo::exists(dest))
    return tr("%1 already exists; remove it or pick it as a local file.").arg(dest);
  try {
    download_id_ = downloads_.enqueue(url, dest, sha256, size, catalog_id);
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
  local_ = false;
  return {};
}

QString ModelWizard::installLocal(const QString& path) {
  const GgufSummary g = inspectGguf(path);
  if (!g.ok) return tr("Not a usable model: %1").arg(g.error);
  ModelRecord m;
  m.path = QFileInfo(path).absoluteFilePath().toStdString();
  m.name = (g.name.isEmpty() ? QFileInfo(path).completeBaseName() : g.name).toStdString();
  m.arch = g.arch.toStdString();
  m.quant = g.quant.toStdString();
  m.size_bytes = g.file_size;
  try {
    registry_.upsert(m);
  } catch (const std::exception& e) {
    return tr("Cannot register the model: %1").arg(QString::fromUtf8(e.what()));
  }
  // The hash links the file to its trained predictors; a large file takes a while,
  // so it is computed off the GUI thread and stored when ready.
  hash_ = hashFileAsync(QString::fromStdString(m.path), this, [this, m](FileHashResult r) mutable {
    if (!r.ok) return;
    m.sha256 = r.sha256.toStdString();
    try {
      registry_.upsert(m);
    } catch (const std::exception&) {
      // The row stays without a hash; it is computed again when the model is opened.
    }
  });
  local_ = true;
  installed_path_ = QString::fromStdString(m.path);
  emit modelInstalled(installed_path_);
  return {};
}

void ModelWizard::markInstalled(const QString& path) {
  installed_path_ = path;
  emit modelInstalled(path);
}

}  // namespace moe
