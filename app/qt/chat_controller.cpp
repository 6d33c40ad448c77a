#include "app/qt/chat_controller.h"

#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QRegularExpression>
#include <QTimer>
#include <algorithm>
#include <random>
#include <utility>

namespace moe {
namespace {

std::string utf8(const QString& s) { return s.toStdString(); }

// 12 GB -> "12.0", 10.5 GB -> "10.5", 10.25 GB -> "10.25".
QString gigabytes(quint64 bytes) {
  QString s = QLocale::c().toString(static_cast<double>(bytes) / 1e9, 'f', 2);
  if (s.endsWith('0')) s.chop(1);
  return s;
}

QString titleFrom(const QString& text) {
  QString t = text.simplified();
  if (t.size() > 48) t = t.left(47).trimmed() + "…";
  return t;
}

}  // namespace

std::optional<SamplingDefaults> samplingFromJson(const std::string& json) {
  const auto doc = QJsonDocument::fromJson(QByteArray::fromStdString(json));
  if (!doc.isObject() || doc.object().isEmpty()) return std::nullopt;
  const auto o = doc.object();
  SamplingDefaults s;
  s.temperature = o.value("temperature").toDouble(s.temperature);
  s.top_p = o.value("top_p").toDouble(s.top_p);
  s.top_k = o.value("top_k").toInt(s.top_k);
  s.min_p = o.value("min_p").toDouble(s.min_p);
  s.repeat_penalty = o.value("repeat_penalty").toDouble(s.repeat_penalty);
  s.max_tokens = o.value("max_tokens").toInt(s.max_tokens);
  return withinRanges(s);
}

std::string samplingToJson(const SamplingDefaults& s) {
  QJsonObject o;
  o["temperature"] = s.temperature;
  o["top_p"] = s.top_p;
  o["top_k"] = s.top_k;
  o["min_p"] = s.min_p;
  o["repeat_penalty"] = s.repeat_penalty;
  o["max_tokens"] = s.max_tokens;
  return QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString();
}

std::string replySamplingJson(const SamplingDefaults& s, uint64_t seed) {
  QJsonObject o = QJsonDocument::fromJson(QByteArray::fromStdString(samplingToJson(s))).object();
  o["seed"] = QString::number(seed);  // a string: JSON numbers lose 64-bit integers
  return QJsonDocument(o).toJson(QJsonDocument::Compact).toStdString();
}

ChatController::ChatController(ConversationStore& store, EngineHost& engine, AppSettings& settings,
                               QObject* parent)
    : QObject(parent), store_(store), engine_(engine), settings_(settings) {
  auto* w = engine_.worker();
  connect(w, &InferenceWorker::loadProgress, this, &ChatController::modelLoading);
  connect(w, &InferenceWorker::modelLoaded, this, [this](const LoadedModelInfo& info) {
    model_ = info;
    emit modelLoaded(info);
  });
  connect(w, &InferenceWorker::loadFailed, this, [this](const QString& why) {
    model_.reset();
    emit modelFailed(why);
  });
  connect(w, &InferenceWorker::textReady, this, &ChatController::onText);
  connect(w, &InferenceWorker::replyFinished, this, &ChatController::onFinished);
  connect(w, &InferenceWorker::replyFailed, this, &ChatController::onFailed);
  // The settings dialog writes the budget and the policy one after the other:
  // one reload for both, on the next turn of the event loop.
  connect(&settings_, &AppSettings::offloadChanged, this, [this] {
    if (std::exchange(reload_queued_, true)) return;
    QTimer::singleShot(0, this, [this] {
      reload_queued_ = false;
      reloadWithSettings();
    });
  });
}

ChatController::~ChatController() {
  if (!reply_id_) return;
  engine_.stop(reply_id_);
  ReplyStats s;
  s.stop_reason = "app closed";
  try {
    store_.finishReply(reply_id_, utf8(reply_text_), MessageState::Stopped, s);
  } catch (const std::exception&) {
    // The last checkpoint stays; the next start marks the reply interrupted.
  }
}

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

void ChatController::openConversation(qint64 id) {
  if (id != 0 && !store_.get(id)) return;
  current_ = id;
  emit conversationOpened(id);
}

bool ChatController::saved(const QString& action, const std::function<void()>& write) {
  try {
    write();
    return true;
  } catch (const std::exception& e) {
    emit error(QStringLiteral("Could not %1: %2. The chats already saved are kept; if the disk is full, "
                              "free some space and try again.")
                   .arg(action, QString::fromUtf8(e.what())));
    return false;
  }
}

bool ChatController::written(const QString& action, const std::function<void()>& write) {
  if (readOnly()) {
    emit error(QStringLiteral("Could not %1: %2").arg(action, read_only_why_));
    return false;
  }
  return saved(action, write);
}

void ChatController::setReadOnly(const QString& why) { read_only_why_ = why; }

qint64 ChatController::newConversation() {
  qint64 id = 0;
  if (!written(QStringLiteral("start a new chat"), [&] {
        id = store_.createConversation(kNewChatTitle, {}, "{}", model_ ? model_->path : std::string());
      }))
    return 0;
  emit conversationsChanged();
  openConversation(id);
  return id;
}

qint64 ChatController::duplicateConversation(qint64 id) {
  qint64 copy = 0;
  if (!written(QStringLiteral("duplicate the chat"), [&] { copy = store_.duplicate(id); }) || !copy) return 0;
  emit conversationsChanged();
  openConversation(copy);
  return copy;
}

bool ChatController::deleteConversation(qint64 id) {
  if (busy() && reply_conversation_ == id) stop();
  bool deleted = false;
  if (!written(QStringLiteral("delete the chat"), [&] { deleted = store_.softDelete(id); }) || !deleted)
    return false;
  useTraces().removeConversation(id);  // hidden states of a deleted chat are never kept
  if (current_ == id) openConversation(0);
  emit conversationsChanged();
  return true;
}

bool ChatController::undoDelete(qint64 id) {
  bool restored = false;
  if (!written(QStringLiteral("restore the chat"), [&] { restored = store_.restore(id); }) || !restored)
    return false;
  emit conversationsChanged();
  return true;
}

int64_t ChatController::purgeDeleted() {
  std::vector<int64_t> ids;
  int64_t n = 0;
  if (!written(QStringLiteral("empty the deleted chats"), [&] {
        for (const auto& c : store_.listDeleted()) ids.push_back(c.id);
        n = store_.purgeDeleted();
      }))
    return 0;
  const UseTraceStore traces = useTraces();
  for (int64_t id : ids) traces.removeConversation(id);
  return n;
}

std::vector<Message> ChatController::messages() const {
  if (!current_) return {};
  auto msgs = store_.messages(current_);
  if (!reply_id_ || reply_conversation_ != current_) return msgs;
  auto streaming = store_.message(reply_id_);
  if (!streaming || streaming->shown) return msgs;
  streaming->text = utf8(reply_text_);
  for (auto& m : msgs)
    if (m.turn == streaming->turn) m = *streaming;
  return msgs;
}

void ChatController::setSystemPrompt(const QString& text) {
  if (current_)
    written(QStringLiteral("save the system prompt"), [&] { store_.setSystemPrompt(current_, utf8(text)); });
}

QString ChatController::systemPrompt() const {
  if (current_)
    if (auto c = store_.get(current_)) return QString::fromStdString(c->system_prompt);
  return {};
}

std::optional<SamplingDefaults> ChatController::ownSampling() const {
  if (current_)
    if (auto c = store_.get(current_)) return samplingFromJson(c->sampling_json);
  return std::nullopt;
}

void ChatController::clearSampling() {
  if (current_)
    written(QStringLiteral("save the chat's settings"), [&] { store_.setSampling(current_, "{}"); });
}

SamplingDefaults ChatController::sampling() const {
  if (current_)
    if (auto c = store_.get(current_))
      if (auto s = samplingFromJson(c->sampling_json)) return *s;
  return settings_.sampling();
}

void ChatController::setSampling(const SamplingDefaults& s) {
  if (current_)
    written(QStringLiteral("save the chat's settings"),
            [&] { store_.setSampling(current_, samplingToJson(s)); });
}

bool ChatController::send(const QString& text) {
  if (busy() || !model_ || text.trimmed().isEmpty()) return false;
  if (!current_ && !newConversation()) return false;
  qint64 id = 0;
  if (!written(QStringLiteral("save your message"), [&] {
        const auto conv = store_.get(current_);
        if (conv && conv->title == kNewChatTitle) store_.rename(current_, utf8(titleFrom(text)));
        id = store_.addMessage(current_, Role::User, utf8(text));  // committed now
      }))
    return false;
  if (auto m = store_.message(id)) emit messageAdded(*m);
  emit conversationsChanged();
  startReply();
  return true;
}

void ChatController::startReply(qint64 alternative_of) {
  const auto msgs = history(current_);
  const SamplingDefaults s = sampling();
  const uint64_t seed = seeds_();  // a new draw per reply, so Regenerate gives another answer
  ReplyOrigin origin;
  if (model_) {
    origin.model_name = model_->path.empty()
                            ? model_->name
                            : QFileInfo(QString::fromStdString(model_->path)).fileName().toStdString();
    origin.model_sha256 = model_->model_sha256;
  }
  origin.sampling_json = replySamplingJson(s, seed);
  qint64 reply_id = 0;
  if (!written(QStringLiteral("start the reply"), [&] {
        reply_id = alternative_of ? store_.beginAlternative(alternative_of, origin)
                                  : store_.beginReply(current_, origin);
      }))
    return;
  reply_conversation_ = current_;
  reply_text_.clear();
  reply_id_ = reply_id;
  checkpoint_failed_ = false;
  checkpointed_chars_ = 0;
  since_checkpoint_.start();
  if (alternative_of)
    emit conversationOpened(current_);  // the turn's bubble now shows the new reply
  else if (auto m = store_.message(reply_id_))
    emit messageAdded(*m);
  emit busyChanged(true);

  GenerationParams p;
  p.max_tokens = s.max_tokens;
  p.sampler.temperature = static_cast<float>(s.temperature);
  p.sampler.top_p = static_cast<float>(s.top_p);
  p.sampler.top_k = s.top_k;
  p.sampler.min_p = static_cast<float>(s.min_p);
  p.sampler.repeat_penalty = static_cast<float>(s.repeat_penalty);
  p.sampler.seed = seed;
  engine_.generate(reply_id_, msgs, p, settings_.thinking(), tracePathFor(current_));
}

std::vector<ChatMessage> ChatController::history(qint64 conversation_id) const {
  std::vector<ChatMessage> out;
  if (auto c = store_.get(conversation_id); c && !c->system_prompt.empty())
    out.push_back({"system", c->system_prompt});
  for (const auto& m : store_.messages(conversation_id)) {
    if (m.role == Role::System || m.state == MessageState::Error) continue;
    if (m.role == Role::Assistant && m.text.empty()) continue;
    out.push_back({toString(m.role), m.text});
  }
  // A reply answers the last user message: the turn being regenerated is left out.
  while (!out.empty() && out.back().role == toString(Role::Assistant)) out.pop_back();
  return out;
}

void ChatController::stop() {
  if (reply_id_) engine_.stop(reply_id_);
}

bool ChatController::regenerate() {
  if (busy() || !model_ || !current_) return false;
  const auto msgs = store_.messages(current_);
  if (std::none_of(msgs.begin(), msgs.end(), [](const Message& m) { return m.role == Role::User; }))
    return false;
  startReply(msgs.back().role == Role::Assistant ? msgs.back().id : 0);
  return busy();
}

bool ChatController::showAlternative(qint64 message_id, int step) {
  if (busy()) return false;
  std::vector<Message> turn;
  if (!saved(QStringLiteral("read the replies"), [&] { turn = store_.alternatives(message_id); }))
    return false;
  const auto at =
      std::find_if(turn.begin(), turn.end(), [&](const Message& m) { return m.id == message_id; });
  if (at == turn.end()) return false;
  const auto target = (at - turn.begin()) + step;
  if (target < 0 || target >= static_cast<qsizetype>(turn.size())) return false;
  const qint64 id = turn[static_cast<size_t>(target)].id;
  if (!written(QStringLiteral("show the other reply"), [&] { store_.showAlternative(id); })) return false;
  if (auto m = store_.message(id)) emit messageReplaced(message_id, *m);
  return true;
}

bool ChatController::editAndResend(qint64 message_id, const QString& text) {
  if (busy() || !model_ || !current_ || text.trimmed().isEmpty()) return false;
  const auto m = store_.message(message_id);
  if (!m || m->conversation_id != current_ || m->role != Role::User) return false;
  int64_t earlier_reply = 0;  // kept: the new reply is another alternative of its turn
  if (!written(QStringLiteral("save the edited message"),
               [&] { earlier_reply = store_.editForResend(current_, message_id, utf8(text)); }))
    return false;
  emit conversationOpened(current_);
  startReply(earlier_reply);
  return true;
}

void ChatController::onText(qint64 reply_id, const QString& chunk) {
  if (reply_id != reply_id_) return;
  // A reply starts at its first visible character: tokenizers put the space before a
  // word into the word's token, so the first one would open the reply with a space.
  const QString text = reply_text_.isEmpty() ? QString(chunk).remove(QRegularExpression("^\\s+")) : chunk;
  if (text.isEmpty()) return;
  reply_text_ += text;
  // Saved before it is shown: the first words at once, then often enough that
  // a kill keeps what the user saw.
  if (checkpointed_chars_ == 0 || since_checkpoint_.elapsed() >= kCheckpointMs ||
      reply_text_.size() - checkpointed_chars_ >= kCheckpointChars)
    checkpoint();
  emit replyText(reply_id, reply_text_);
}

void ChatController::checkpoint() {
  since_checkpoint_.restart();
  checkpointed_chars_ = reply_text_.size();
  try {
    store_.checkpointReply(reply_id_, utf8(reply_text_));
  } catch (const std::exception& e) {
    // The reply goes on in the window; the final write tries again.
    if (!std::exchange(checkpoint_failed_, true))
      emit error(
          QStringLiteral("Could not save the reply as it streams: %1").arg(QString::fromUtf8(e.what())));
  }
}

void ChatController::onFinished(qint64 reply_id, const EngineReplyStats& st) {
  if (reply_id != reply_id_) return;
  ReplyStats s;
  s.prompt_tokens = st.prompt_tokens;
  s.completion_tokens = st.completion_tokens;
  if (st.completion_tokens > 0) s.ttft_ms = st.ttft_ms;
  if (st.prefill_tps > 0) s.prefill_tps = st.prefill_tps;
  if (st.decode_tps > 0) s.decode_tps = st.decode_tps;
  s.stop_reason = st.stop_reason;
  const qint64 conversation = reply_conversation_;
  finish(st.stop_reason == "cancelled" ? MessageState::Stopped : MessageState::Complete, s);
  afterRecording(conversation, st);
  if (st.dropped_messages > 0) emit historyLeftOut(st.dropped_messages);
  reloadIfPending();
}

void ChatController::onFailed(qint64 reply_id, const QString& reason) {
  if (reply_id != reply_id_) return;
  ReplyStats s;
  s.stop_reason = utf8(reason);
  const qint64 conversation = reply_conversation_;
  finish(MessageState::Error, s);
  afterRecording(conversation, {});
  emit error(reason);
  reloadIfPending();
}

void ChatController::finish(MessageState state, const ReplyStats& stats) {
  const qint64 id = reply_id_;
  written(QStringLiteral("save the reply"), [&] { store_.finishReply(id, utf8(reply_text_), state, stats); });
  reply_id_ = 0;
  reply_conversation_ = 0;
  reply_text_.clear();
  if (auto m = store_.message(id)) emit replyFinished(*m);
  emit conversationsChanged();
  emit busyChanged(false);
}

}  // namespace moe
