#include "app/qt/app_settings.h"

#include <algorithm>
#include <cmath>

#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

namespace moe {
namespace {

const char* kVramBudget = "offload/vram_budget_bytes";
const char* kPolicy = "offload/policy";
const char* kModelsFolder = "folders/models";
const char* kDataFolder = "folders/data";
const char* kTheme = "ui/theme";
const char* kPerfDetails = "ui/perf_details";
const char* kLastModel = "models/last";
const char* kThinking = "chat/thinking";
const char* kLearnFromUse = "privacy/learn_from_use";
const char* kRetrainOffered = "privacy/retrain_offered";

}  // namespace

QStringList AppSettings::policies() { return {"proactive", "reactive-lru", "static", "cpu-experts"}; }

AppSettings::AppSettings(QSettings& store, QObject* parent) : QObject(parent), store_(store) {}

quint64 AppSettings::vramBudgetBytes() const { return store_.value(kVramBudget, 0).toULongLong(); }

void AppSettings::setVramBudgetBytes(quint64 bytes) {
  if (bytes == vramBudgetBytes()) return;
  store_.setValue(kVramBudget, bytes);
  emit offloadChanged();
}

QString AppSettings::modelKey(const QString& model_path) {
  if (model_path.isEmpty()) return QStringLiteral("demo");
  // QSettings keys split at '/' and '\\': the file name with those made plain.
  QString name = QFileInfo(model_path).fileName();
  name.replace('/', '_').replace('\\', '_');
  return name;
}

int AppSettings::contextLength(const QString& model_path) const {
  const int n = store_.value("context/" + modelKey(model_path), kDefaultContextLength).toInt();
  return std::clamp(n, kMinContextLength, kMaxContextLength);
}

void AppSettings::setContextLength(const QString& model_path, int tokens) {
  tokens = std::clamp(tokens, kMinContextLength, kMaxContextLength);
  if (tokens == contextLength(model_path)) return;
  store_.setValue("context/" + modelKey(model_path), tokens);
  emit offloadChanged();  // what is loaded: the same reload as a budget change
}

QString AppSettings::cachePolicy() const {
  const QString p = store_.value(kPolicy).toString();
  return policies().contains(p) ? p : policies().front();
}

void AppSettings::setCachePolicy(const QString& policy) {
  if (!policies().contains(policy) || policy == cachePolicy()) return;
  store_.setValue(kPolicy, policy);
  emit offloadChanged();
}

SamplingDefaults withinRanges(const SamplingDefaults& s) {
  const SamplingDefaults d;
  const auto fit = [](double v, double fallback, double lo, double hi) {
    return std::isfinite(v) ? std::clamp(v, lo, hi) : fallback;
  };
  SamplingDefaults r;  // the ranges of ui/sampling_form.cpp
  r.temperature = fit(s.temperature, d.temperature, 0, 2);
  r.top_p = fit(s.top_p, d.top_p, 0, 1);
  r.top_k = std::clamp(s.top_k, 0, 1000);
  r.min_p = fit(s.min_p, d.min_p, 0, 1);
  r.repeat_penalty = fit(s.repeat_penalty, d.repeat_penalty, 1, 2);
  r.max_tokens = std::clamp(s.max_tokens, 1, SamplingDefaults::kMaxTokensLimit);
  return r;
}

SamplingDefaults AppSettings::sampling() const {
  SamplingDefaults d;
  SamplingDefaults s;
  s.temperature = store_.value("sampling/temperature", d.temperature).toDouble();
  s.top_p = store_.value("sampling/top_p", d.top_p).toDouble();
  s.top_k = store_.value("sampling/top_k", d.top_k).toInt();
  s.min_p = store_.value("sampling/min_p", d.min_p).toDouble();
  s.repeat_penalty = store_.value("sampling/repeat_penalty", d.repeat_penalty).toDouble();
  s.max_tokens = store_.value("sampling/max_tokens", d.max_tokens).toInt();
  return withinRanges(s);
}

void AppSettings::setSampling(const SamplingDefaults& s) {
  store_.setValue("sampling/temperature", s.temperature);
  store_.setValue("sampling/top_p", s.top_p);
  store_.setValue("sampling/top_k", s.top_k);
  store_.setValue("sampling/min_p", s.min_p);
  store_.setValue("sampling/repeat_penalty", s.repeat_penalty);
  store_.setValue("sampling/max_tokens", s.max_tokens);
  emit samplingChanged();
}

QString AppSettings::modelsFolder() const {
  const QString fallback = QDir(dataFolder()).filePath("models");
  return store_.value(kModelsFolder, fallback).toString();
}

void AppSettings::setModelsFolder(const QString& dir) {
  if (dir == modelsFolder()) return;
  store_.setValue(kModelsFolder, dir);
  emit foldersChanged();
}

QString AppSettings::dataFolder() const {
  return store_.value(kDataFolder, QStandardPaths::writableLocation(QStandardPaths::AppDataLocation))
      .toString();
}

void AppSettings::setDataFolder(const QString& dir) {
  if (dir == dataFolder()) return;
  store_.setValue(kDataFolder, dir);
  emit foldersChanged();
}

QString AppSettings::theme() const {
  const QString t = store_.value(kTheme, "system").toString();
  return (t == "light" || t == "dark") ? t : QString("system");
}

void AppSettings::setTheme(const QString& theme) {
  if (theme == this->theme()) return;
  store_.setValue(kTheme, theme);
  emit themeChanged();
}

bool AppSettings::perfDetails() const { return store_.value(kPerfDetails, false).toBool(); }
void AppSettings::setPerfDetails(bool shown) { store_.setValue(kPerfDetails, shown); }

bool AppSettings::thinking() const { return store_.value(kThinking, true).toBool(); }

void AppSettings::setThinking(bool on) { store_.setValue(kThinking, on); }

QString AppSettings::lastModelPath() const { return store_.value(kLastModel).toString(); }

void AppSettings::setLastModelPath(const QString& path) { store_.setValue(kLastModel, path); }

bool AppSettings::learnFromUse() const { return store_.value(kLearnFromUse, false).toBool(); }

void AppSettings::setLearnFromUse(bool on) {
  if (on == learnFromUse()) return;
  store_.setValue(kLearnFromUse, on);
  emit learnFromUseChanged(on);
}

QString AppSettings::useTracesFolder() const { return QDir(dataFolder()).filePath("use-traces"); }

bool AppSettings::retrainOffered(const QString& model_sha256) const {
  return store_.value(kRetrainOffered).toStringList().contains(model_sha256);
}

void AppSettings::setRetrainOffered(const QString& model_sha256) {
  QStringList offered = store_.value(kRetrainOffered).toStringList();
  if (offered.contains(model_sha256)) return;
  offered.push_back(model_sha256);
  store_.setValue(kRetrainOffered, offered);
}

}  // namespace moe
