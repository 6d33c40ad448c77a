#include "app/gui/app_wiring.h"

#include <QFileInfo>

#include "app/core/model_predictor.h"
#include "app/core/predictor_store.h"

namespace moe {

AppWiring::AppWiring(MainWindow& window, AppSettings& settings, ModelRegistry& registry, AppDatabase& db)
    : window_(window),
      settings_(settings),
      registry_(registry),
      db_(db),
      download_store_(db),
      downloads_(std::make_unique<DownloadManager>(download_store_, &registry_)),
      catalog_(ModelCatalog::builtIn()) {
  window_.setModelListSource([this] {
    std::vector<ModelChoice> out;
    for (const auto& m : registry_.list()) {
      const QString path = QString::fromStdString(m.path);
      if (!QFileInfo::exists(path)) continue;  // moved or deleted since it was registered
      out.push_back({m.name.empty() ? QFileInfo(path).fileName() : QString::fromStdString(m.name), path});
    }
    return out;
  });
  window_.setModelWizardLauncher([this] { openWizard(); });
  window_.setPredictorSource([this](const ModelChoice& choice) {
    return storedPredictorFor(db_, registry_, choice.path.toStdString());
  });
  // Recorded traces (learning from use) are keyed by the model file's SHA-256.
  window_.chat().setModelHashLookup([this](const std::string& path) {
    const auto m = registry_.findByPath(path);
    return m ? m->sha256 : std::string();
  });
  window_.setPredictorImporter([this](const QString& path) {
    try {
      const PredictorSet set = PredictorStore(db_).importSet(path.toStdString());
      return QString(
                 "Imported a predictor for %1 (%2 layers, distance %3); it is used under the proactive "
                 "policy.")
          .arg(QString::fromStdString(set.model_name))
          .arg(set.layers.size())
          .arg(set.distance);
    } catch (const std::exception& e) {
      return QString("Could not import %1: %2").arg(path, e.what());
    }
  });
  QObject::connect(downloads_.get(), &DownloadManager::finished, &window_,
                   [this](qint64, const QString&) { window_.refreshModelList(); });
}

AppWiring::~AppWiring() = default;

std::unique_ptr<ModelWizard> AppWiring::makeWizard(QWidget* parent) {
  // "auto" has no number before a GPU is probed: show the fit for the reference card.
  const quint64 budget = settings_.vramBudgetBytes() ? settings_.vramBudgetBytes() : kReferenceVramBytes;
  return std::make_unique<ModelWizard>(*downloads_, registry_, catalog_, budget, settings_.modelsFolder(),
                                       parent);
}

void AppWiring::openWizard() {
  auto wizard = makeWizard(&window_);
  QString installed;
  QObject::connect(wizard.get(), &ModelWizard::modelInstalled, &window_,
                   [&installed](const QString& path) { installed = path; });
  wizard->exec();
  window_.refreshModelList();
  if (!installed.isEmpty()) window_.loadModel({QFileInfo(installed).fileName(), installed});
}

}  // namespace moe
