#include "ui/predictor_wizard.h"

#include <QDir>
#include <QFileInfo>

#include "app/core/app_database.h"
#include "app/core/model_predictor.h"
#include "app/core/model_registry.h"
#include "app/core/predictor_store.h"
#include "ui/predictor_wizard_pages.h"

namespace moe {

QString percentText(double share) {
  return share < 0 ? QString::fromUtf8("—") : QString("%1%").arg(share * 100, 0, 'f', 1);
}

PredictorWizard::PredictorWizard(AppDatabase& db, ModelRegistry& registry, const QString& traces_dir,
                                 QWidget* parent)
    : QWizard(parent), db_(db), registry_(registry), traces_dir_(traces_dir) {
  setWindowTitle("Train a predictor");
  setObjectName("predictorWizard");
  setOption(QWizard::NoBackButtonOnLastPage);
  setOption(QWizard::NoCancelButtonOnLastPage);
  traceOptions.max_new_tokens = 8;
  setPage(ModelStep, new PredictorModelPage(*this));
  setPage(SourceStep, new PromptSourcePage(*this));
  setPage(TraceStep, new TracePage(*this));
  setPage(TrainStep, new TrainPage(*this));
  setPage(EvaluationStep, new EvaluationPage(*this));
  setPage(SaveStep, new SavePage(*this));
  // Big enough for the widest page (the source page's form, the evaluation table)
  // without clipping text or squashing the spin boxes; never smaller than it needs.
  QSize need(880, 640);
  for (int id : pageIds()) need = need.expandedTo(page(id)->sizeHint() + QSize(48, 160));
  resize(need);

  connect(&trainer_, &PredictorTrainer::opened, this,
          [this](const QString& sha, const QString& name, const TraceRates& rates) {
            if (!opening_) return;
            opening_ = false;
            if (model_.sha256.isEmpty() && !model_.path.isEmpty()) {
              // Hashed on the worker: remember it, so the next open needs no hashing.
              if (auto rec = registry_.findByPath(model_.path.toStdString())) {
                rec->sha256 = sha.toStdString();
                registry_.upsert(*rec);
              }
            }
            model_.sha256 = sha;
            if (model_.name.isEmpty()) model_.name = name;
            rates_ = rates;
            ready_ = true;
            emit modelReadyChanged();
          });
  connect(&trainer_, &PredictorTrainer::failed, this, [this](const QString& reason) {
    if (!opening_) return;
    opening_ = false;
    emit modelFailed(reason);
  });
}

PredictorWizard::~PredictorWizard() { trainer_.cancel(); }

void PredictorWizard::setRecordedTraceSource(std::function<QString(const QString&)> source) {
  recorded_ = std::move(source);
}

QString PredictorWizard::recordedTraceFor(const QString& sha256) const {
  if (!recorded_ || sha256.isEmpty()) return {};
  const QString path = recorded_(sha256);
  return !path.isEmpty() && QFileInfo::exists(path) ? path : QString();
}

std::vector<TrainableModel> PredictorWizard::models() {
  auto withPredictor = [this](TrainableModel m) {
    if (auto info = storedPredictorInfo(db_, m.sha256.toStdString(), trainOptions.distance)) {
      m.predictor = QString("distance %1, %2 layers").arg(info->distance).arg(info->layers);
      m.accuracy = info->mean_accuracy;
    }
    return m;
  };
  std::vector<TrainableModel> out;
  out.push_back(withPredictor({QString::fromStdString(demoModelName(appDemoModel())), QString(),
                               QString::fromStdString(demoModelSha256())}));
  for (const auto& r : registry_.list()) {
    const QString path = QString::fromStdString(r.path);
    if (!QFileInfo::exists(path)) continue;
    const QString name = r.name.empty() ? QFileInfo(path).fileName() : QString::fromStdString(r.name);
    out.push_back(withPredictor({name, path, QString::fromStdString(r.sha256)}));
  }
  return out;
}

void PredictorWizard::chooseModel(const TrainableModel& m) {
  if ((ready_ || opening_) && m.path == model_.path) return;  // already open (or opening)
  model_ = m;
  ready_ = false;
  opening_ = true;
  trained.reset();
  trainer_.open(m.path, m.sha256);
  emit modelReadyChanged();
}

QString PredictorWizard::saveTrained() {
  if (!trained) return "there is no trained predictor to save";
  try {
    PredictorStore(db_).save(*trained);
  } catch (const std::exception& e) {
    return QString::fromUtf8(e.what());
  }
  emit predictorSaved(model_.path, model_.sha256);
  return {};
}

int PredictorWizard::nextId() const {
  switch (currentId()) {
    case ModelStep: return SourceStep;
    case SourceStep: return source == Source::Recorded ? TrainStep : TraceStep;
    case TraceStep: return TrainStep;
    case TrainStep: return EvaluationStep;
    case EvaluationStep: return SaveStep;
    default: return -1;
  }
}

}  // namespace moe
