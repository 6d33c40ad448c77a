// The chat controller's model side: loading a model, reloading it with changed
// settings once no reply runs (or switching to another), and the routing traces
// recorded while chatting (learning from use).
#include <QFileInfo>
#include <QLocale>
#include <utility>

#include "app/qt/chat_controller.h"

namespace moe {
namespace {

std::string utf8(const QString& s) { return s.toStdString(); }

// 12 GB -> "12.0", 10.5 GB -> "10.5", 10.25 GB -> "10.25".
QString gigabytes(quint64 bytes) {
  QString s = QLocale::c().toString(static_cast<double>(bytes) / 1e9, 'f', 2);
  if (s.endsWith('0')) s.chop(1);
  return s;
}

}  // namespace

void ChatController::loadModel(const EngineLoadOptions& opts) {
  if (busy()) stop();
  model_.reset();
  reload_pending_ = false;  // this load reads the settings as they are now
  deferred_load_.reset();
  deferred_switch_ = false;
  EngineLoadOptions o = opts;
  if (o.model_sha256.empty() && !o.demo && model_hash_) {
    try {
      o.model_sha256 = model_hash_(o.model_path);
    } catch (const std::exception&) {
      // unknown: replies with this model are not recorded
    }
  }
  load_opts_ = o;
  engine_.loadModel(o);
}

QString ChatController::reloadChange(const EngineLoadOptions& loaded) const {
  QStringList parts;
  const quint64 budget = settings_.vramBudgetBytes();
  if (budget != loaded.vram_budget_bytes)
    parts << (budget ? QStringLiteral("a %1 GB budget").arg(gigabytes(budget))
                     : QStringLiteral("the automatic budget"));
  const QString policy = settings_.cachePolicy();
  if (policy.toStdString() != loaded.policy) parts << QStringLiteral("the %1 policy").arg(policy);
  const int n_ctx = settings_.contextLength(QString::fromStdString(loaded.model_path));
  if (n_ctx != loaded.n_ctx) parts << QStringLiteral("a context of %1 tokens").arg(n_ctx);
  return parts.join(QStringLiteral(" and "));
}

bool ChatController::reloadWithSettings() {
  if (!load_opts_) return false;
  if (deferred_load_ && busy()) return true;  // that reload reads the settings when it runs
  const QString change = reloadChange(*load_opts_);
  const QString name = model_ ? QString::fromStdString(model_->name)
                       : load_opts_->demo
                           ? QStringLiteral("Demo model")
                           : QFileInfo(QString::fromStdString(load_opts_->model_path)).fileName();
  if (change.isEmpty()) {  // back to what is loaded
    if (std::exchange(reload_pending_, false)) emit reloadScheduled({});
    return false;
  }
  if (busy()) {
    reload_pending_ = true;
    emit reloadScheduled(
        QStringLiteral("%1 reloads with %2 when this reply ends (or stop it)…").arg(name, change));
    return true;
  }
  EngineLoadOptions o = *load_opts_;
  o.vram_budget_bytes = settings_.vramBudgetBytes();
  o.policy = settings_.cachePolicy().toStdString();
  o.n_ctx = settings_.contextLength(QString::fromStdString(o.model_path));
  emit modelReloading(QStringLiteral("Reloading %1 with %2…").arg(name, change));
  loadModel(o);
  return true;
}

void ChatController::reloadWhenIdle(const EngineLoadOptions& opts, const QString& what) {
  const QString name = opts.demo ? QStringLiteral("Demo model")
                                 : QFileInfo(QString::fromStdString(opts.model_path)).fileName();
  if (!busy()) {
    emit modelReloading(QStringLiteral("Reloading %1 with %2…").arg(name, what));
    loadModel(opts);
    return;
  }
  deferred_load_ = opts;
  deferred_what_ = what;
  reload_pending_ = true;
  emit reloadScheduled(
      QStringLiteral("%1 reloads with %2 when this reply ends (or stop it)…").arg(name, what));
}

void ChatController::switchModelWhenIdle(const EngineLoadOptions& opts) {
  const QString name = opts.demo ? QStringLiteral("Demo model")
                                 : QFileInfo(QString::fromStdString(opts.model_path)).fileName();
  if (!busy()) {
    loadModel(opts);
    return;
  }
  deferred_load_ = opts;
  deferred_switch_ = true;
  reload_pending_ = true;
  emit reloadScheduled(QStringLiteral("Switches to %1 when this reply ends (or stop it)…").arg(name));
}

void ChatController::reloadIfPending() {
  if (!std::exchange(reload_pending_, false)) return;
  if (!deferred_load_) {
    reloadWithSettings();
    return;
  }
  if (std::exchange(deferred_switch_, false)) {
    const EngineLoadOptions o = *std::exchange(deferred_load_, std::nullopt);
    emit modelReloading(QStringLiteral("Switching to %1…")
                            .arg(o.demo ? QStringLiteral("Demo model")
                                        : QFileInfo(QString::fromStdString(o.model_path)).fileName()));
    loadModel(o);
    return;
  }
  EngineLoadOptions o = *std::exchange(deferred_load_, std::nullopt);
  o.vram_budget_bytes = settings_.vramBudgetBytes();  // changed meanwhile, maybe
  o.policy = settings_.cachePolicy().toStdString();
  o.n_ctx = settings_.contextLength(QString::fromStdString(o.model_path));
  reloadWhenIdle(o, deferred_what_);  // idle now: loads at once
}

void ChatController::setModelHashLookup(std::function<std::string(const std::string&)> lookup) {
  model_hash_ = std::move(lookup);
}

UseTraceStore ChatController::useTraces() const { return UseTraceStore(utf8(settings_.useTracesFolder())); }

QString ChatController::tracePathFor(qint64 conversation_id) const {
  if (!settings_.learnFromUse() || !model_ || model_->model_sha256.empty()) return {};
  try {
    return QString::fromStdString(useTraces().pathFor(model_->model_sha256, conversation_id));
  } catch (const std::exception&) {
    return {};
  }
}

QString ChatController::recordedTracesFor(const QString& model_sha256) const {
  const UseTraceStore traces = useTraces();
  const std::string out = traces.mergedPathFor(utf8(model_sha256));
  try {
    if (traces.mergeFor(utf8(model_sha256), out).prompts == 0) return {};
  } catch (const std::exception&) {
    return {};
  }
  return QString::fromStdString(out);
}

void ChatController::afterRecording(qint64 conversation_id, const EngineReplyStats& stats) {
  const auto conv = store_.get(conversation_id);
  if (!conv || conv->deleted_at) {
    useTraces().removeConversation(conversation_id);  // deleted while the reply ran
    return;
  }
  if (stats.traced_tokens <= 0 || !model_ || model_->model_sha256.empty()) return;
  const QString sha = QString::fromStdString(model_->model_sha256);
  if (settings_.retrainOffered(sha)) return;
  const UseTraceSummary s = useTraces().summary(model_->model_sha256);
  if (s.tokens < UseTraceStore::kRetrainSuggestTokens) return;
  settings_.setRetrainOffered(sha);
  emit retrainSuggested(sha, s.tokens);
}

}  // namespace moe
