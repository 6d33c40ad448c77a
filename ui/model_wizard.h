// The model wizard: choose a model (from the catalog, showing size, licence,
// checksum status and whether it fits the current VRAM budget; from a pasted URL;
// or a local GGUF, accepted only if the engine's GGUF reader and config parser
// accept it) -> download (progress, speed, ETA, pause/resume, errors) -> done
// (registered in the ModelRegistry). A fourth way in: search the Hugging Face hub
// (HubSearchPage) for a GGUF file of a supported MoE model. Every dependency comes in through the
// constructor; the wizard owns none of them.
#pragma once

#include <QString>
#include <QUrl>
#include <QWizard>

#include "app/qt/file_hasher.h"
#include "app/qt/model_catalog.h"

namespace moe {

class DownloadManager;
class ModelRegistry;
class ChooseModelPage;
class DownloadModelPage;
class InstalledModelPage;
class HubSearchPage;

class ModelWizard : public QWizard {
  Q_OBJECT

 public:
  enum PageId { ChoosePage, DownloadPage, DonePage, HubPage };

  // `models_dir`: where downloads go (created when missing).
  ModelWizard(DownloadManager& downloads, ModelRegistry& registry, const ModelCatalog& catalog,
              const PlanRequest& plan_request, const DeviceMemory& device, const QString& models_dir,
              QWidget* parent = nullptr);
  ~ModelWizard() override;

  DownloadManager& downloads() { return downloads_; }
  ModelRegistry& registry() { return registry_; }
  const ModelCatalog& catalog() const { return catalog_; }
  // What the fit column resolves each entry's plan with (app/core/load_plan.h).
  const PlanRequest& planRequest() const { return plan_request_; }
  const DeviceMemory& device() const { return device_; }
  QString fitHeading() const;  // the fit column's header
  QString fitFor() const;      // "Fit shown for ..." under the page titles
  const QString& modelsDir() const { return models_dir_; }

  // Where the Hugging Face page searches (tests point it at a local server).
  const QUrl& hubBase() const { return hub_base_; }
  void setHubBase(const QUrl& base) { hub_base_ = base; }

  qint64 downloadId() const { return download_id_; }
  QString installedPath() const { return installed_path_; }

  // Used by the pages: start a download (returns an error message, empty on
  // success) or register a local file that passed the checks.
  QString startDownload(const QUrl& url, const QString& file_name, const QString& sha256, qint64 size,
                        const QString& catalog_id);
  QString installLocal(const QString& path);
  void markInstalled(const QString& path);
  // The choose page's "search Hugging Face": Next goes to the hub page.
  void chooseHub(bool hub) { hub_ = hub; }

  int nextId() const override;

 signals:
  void modelInstalled(const QString& path);

 private:
  DownloadManager& downloads_;
  ModelRegistry& registry_;
  const ModelCatalog& catalog_;
  PlanRequest plan_request_;
  DeviceMemory device_;
  QString models_dir_;
  qint64 download_id_ = 0;
  QString installed_path_;
  bool local_ = false;
  bool hub_ = false;
  QUrl hub_base_{QStringLiteral("https://huggingface.co")};
  HashJob hash_;  // a local file's SHA-256, computed after it is registered
};

}  // namespace moe
