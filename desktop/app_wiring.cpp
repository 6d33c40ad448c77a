#include "desktop/app_wiring.h"

#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QStatusBar>
#include <algorithm>
#include <optional>
#include <utility>

#include "app/core/fit_words.h"
#include "app/core/installed_models.h"
#include "app/core/model_predictor.h"
#include "app/core/predictor_store.h"
#include "ui/downloads_view.h"

namespace moe {

std::vector<QString> ggufFilesIn(const QString& folder, int limit) {
  std::vector<QString> out;
  if (folder.isEmpty()) return out;
  QDirIterator it(folder, {"*.gguf", "*.GGUF"}, QDir::Files | QDir::Readable, QDirIterator::Subdirectories);
  while (it.hasNext() && static_cast<int>(out.size()) < limit)
    out.push_back(QFileInfo(it.next()).absoluteFilePath());
  std::sort(out.begin(), out.end());
  return out;
}

AppWiring::AppWiring(MainWindow& window, AppSettings& settings, ModelRegistry& registry, AppDatabase& db,
                     DeviceProbe::Probe probe)
    : window_(window),
      settings_(settings),
      registry_(registry),
      db_(db),
      download_store_(db),
      downloads_(std::make_unique<DownloadManager>(download_store_, &registry_)),
      probe_(std::make_unique<DeviceProbe>(std::move(probe))),
      catalog_(ModelCatalog::builtIn()) {
  probe_->start();  // off the GUI thread; the views that need it wait for probed()
  // The model menu: the same list as the models view (app/core/installed_models), without
  // opening the files. The demo entry (empty path) carries the demo's predictor note.
  window_.setModelListSource([this] {
    std::vector<std::string> files;
    for (const QString& f : ggufFilesIn(settings_.modelsFolder())) files.push_back(f.toStdString());
    std::vector<ModelChoice> out;
    for (const InstalledModel& m : listInstalledModels(db_, registry_, files, PlanInputs{}, false))
      out.push_back({m.demo ? QString() : QString::fromStdString(m.name), QString::fromStdString(m.path),
                     QString::fromStdString(m.predictor)});
    return out;
  });
  window_.setModelWizardLauncher([this] { openWizard(); });
  window_.setPredictorWizardLauncher([this] { openPredictorWizard(); });
  window_.setDownloadsViewLauncher([this] {
    auto* view = new DownloadsView(*downloads_, &window_);
    view->setAttribute(Qt::WA_DeleteOnClose);
    view->show();
  });
  window_.setModelsViewLauncher([this] {
    auto* view = makeModelsView(&window_).release();
    view->setAttribute(Qt::WA_DeleteOnClose);
    view->open();
  });
  recorded_traces_ = [this](const QString& sha) { return window_.chat().recordedTracesFor(sha); };
  window_.setRetrainLauncher([this](const QString& sha) { openPredictorWizard(sha); });
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
  // A new models folder: the model menu lists what it holds (the wizard saves there from now on).
  QObject::connect(&settings_, &AppSettings::foldersChanged, &window_,
                   [this] { window_.refreshModelList(); });
}

AppWiring::~AppWiring() = default;

PlanInputs AppWiring::planInputs() const {
  PlanInputs in;
  in.budget = BudgetSetting::fromAppSetting(settings_.vramBudgetBytes());
  in.policy = parsePolicy(settings_.cachePolicy().toStdString());
  const auto& loaded = window_.chat().model();
  in.device = loaded ? loaded->device : probe_->device();
  in.context_of = [this](const std::string& path) {
    return settings_.contextLength(QString::fromStdString(path));
  };
  return in;
}

bool AppWiring::deviceKnown() const { return window_.chat().model() || probe_->done(); }

std::unique_ptr<ModelWizard> AppWiring::makeWizard(QWidget* parent) {
  if (!deviceKnown()) probe_->waitForResult();  // the wizard's fits are made once, when it opens
  const PlanInputs in = planInputs();
  PlanRequest request;
  request.budget = in.budget;
  request.policy = in.policy;
  request.n_ctx = AppSettings::kDefaultContextLength;  // a model not downloaded has no context set
  auto wizard = std::make_unique<ModelWizard>(*downloads_, registry_, catalog_, request, in.device,
                                              settings_.modelsFolder(), parent);
  // A Hugging Face mirror (or, for the screenshots, a local server of recorded answers).
  if (const QString hub = qEnvironmentVariable("MOECHAT_HUB_URL"); !hub.isEmpty())
    wizard->setHubBase(QUrl(hub));
  return wizard;
}

void AppWiring::openWizard() {
  // Its fits are made as it opens, against the device: before the probe has answered
  // it opens when the answer comes, and the GUI thread never waits for CUDA.
  if (!deviceKnown()) {
    if (std::exchange(wizard_waits_for_device_, true)) return;  // asked already
    window_.statusBar()->showMessage(QStringLiteral("Checking the GPU; the model wizard opens then…"));
    QObject::connect(
        probe_.get(), &DeviceProbe::probed, &window_,
        [this] {
          wizard_waits_for_device_ = false;
          window_.statusBar()->clearMessage();
          openWizard();
        },
        Qt::SingleShotConnection);
    return;
  }
  // Window-modal and asynchronous, as the predictor wizard: downloads run meanwhile.
  auto* wizard = makeWizard(&window_).release();
  wizard->setAttribute(Qt::WA_DeleteOnClose);
  auto installed = std::make_shared<QString>();
  QObject::connect(wizard, &ModelWizard::modelInstalled, &window_,
                   [installed](const QString& path) { *installed = path; });
  QObject::connect(wizard, &QDialog::finished, &window_, [this, installed] {
    window_.refreshModelList();
    if (!installed->isEmpty()) window_.loadModel({QFileInfo(*installed).fileName(), *installed});
  });
  wizard->open();
}

std::unique_ptr<ModelsView> AppWiring::makeModelsView(QWidget* parent) {
  auto heading = [this] {
    const PlanInputs in = planInputs();
    return deviceKnown() ? QString::fromStdString(fitHeading(in.budget, in.device))
                         : QStringLiteral("Fits? (checking the GPU…)");
  };
  auto view = std::make_unique<ModelsView>(
      [this] {
        const PlanInputs in = planInputs();
        std::vector<std::string> files;
        for (const QString& f : ggufFilesIn(settings_.modelsFolder())) files.push_back(f.toStdString());
        std::vector<InstalledModel> models = listInstalledModels(db_, registry_, files, in);
        if (!deviceKnown())
          for (InstalledModel& m : models) {
            m.fit = "checking the GPU…";
            m.fit_detail = "The fit is shown once the GPU's free memory is known.";
          }
        return models;
      },
      [this](const InstalledModel& m) {
        const auto& loaded = window_.chat().model();
        if (loaded && loaded->path == m.path) return std::string("it is loaded; load another model first");
        return removeInstalledModel(db_, registry_, m);
      },
      [this](const InstalledModel& m) { return forgetInstalledModel(registry_, m); }, heading(), parent);
  if (!deviceKnown()) {
    ModelsView* v = view.get();
    QObject::connect(probe_.get(), &DeviceProbe::probed, v, [v, heading] {
      v->setFitHeading(heading());
      v->reload();
    });
  }
  QObject::connect(view.get(), &ModelsView::loadRequested, &window_,
                   [this](const QString& name, const QString& path) {
                     window_.loadModel({name, path});
                   });
  QObject::connect(view.get(), &ModelsView::modelRemoved, &window_, [this] { window_.refreshModelList(); });
  return view;
}

std::unique_ptr<PredictorWizard> AppWiring::makePredictorWizard(QWidget* parent) {
  auto wizard = std::make_unique<PredictorWizard>(db_, registry_,
                                                  QDir(settings_.dataFolder()).filePath("traces"), parent);
  if (recorded_traces_) wizard->setRecordedTraceSource(recorded_traces_);
  return wizard;
}

void AppWiring::setRecordedTraceSource(std::function<QString(const QString&)> source) {
  recorded_traces_ = std::move(source);
}

void AppWiring::openPredictorWizard(const QString& retrain_sha256) {
  // Window-modal and asynchronous: training runs while the main window's event loop does.
  auto* wizard = makePredictorWizard(&window_).release();
  const auto& loaded = window_.chat().model();
  if (!retrain_sha256.isEmpty() && loaded && QString::fromStdString(loaded->model_sha256) == retrain_sha256) {
    wizard->chooseModel(
        {QString::fromStdString(loaded->name), QString::fromStdString(loaded->path), retrain_sha256});
    wizard->source = PredictorWizard::Source::Recorded;
  }
  auto saved_for =
      std::make_shared<std::optional<QString>>();  // the model a set was saved for ("": the demo)
  QObject::connect(wizard, &PredictorWizard::predictorSaved, &window_,
                   [saved_for](const QString& path, const QString&) { *saved_for = path; });
  QObject::connect(wizard, &QDialog::finished, &window_, [this, wizard, saved_for] {
    wizard->deleteLater();
    window_.refreshModelList();
    const auto& loaded = window_.chat().model();
    if (*saved_for && loaded && QString::fromStdString(loaded->path) == **saved_for)
      window_.reloadModel("its new predictor");  // after the reply in progress, if any
  });
  wizard->open();
}

}  // namespace moe
