#include "app/qt/chat_controller.h"

#include <QFileInfo>
#include <QRegularExpression>
#include <QTimer>
#include <algorithm>
#include <random>
#include <utility>

#include "app/qt/sampling_json.h"

namespace moe {
namespace {

std::string utf8(const QString& s) { return s.toStdString(); }

QString titleFrom(const QString& text) {
  QString t = text.simplified();
  if (t.size() > 48) t = t.left(47).trimmed() + "…";
  return t;
}

}  // namespace

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
