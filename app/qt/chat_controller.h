// The chat's one writer: turns what the user does (send, stop, regenerate,
// edit-and-resend, switch conversation) into store writes and engine calls,
// and the engine's signals into store writes and view updates. Lives on the
// GUI thread. Durability: the user's message is committed before the engine
// sees it; a streaming reply is checkpointed when its first text arrives, then
// every kCheckpointMs or kCheckpointChars, whichever comes first; the final
// text, state and figures are written in one transaction. Regenerate keeps the
// earlier replies as alternatives of the turn.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <functional>
#include <optional>
#include <random>

#include "app/core/chat_engine.h"
#include "app/core/conversation_store.h"
#include "app/core/use_traces.h"
#include "app/qt/app_settings.h"
#include "app/qt/inference_worker.h"

namespace moe {

class ChatController : public QObject {
  Q_OBJECT

 public:
  // A checkpoint commit costs a few ms (an fsync), so a kill loses at most a
  // quarter of a second of what was on screen.
  static constexpr int kCheckpointMs = 250;
  static constexpr int kCheckpointChars = 400;
  static constexpr const char* kNewChatTitle = "New chat";

  ChatController(ConversationStore& store, EngineHost& engine, AppSettings& settings,
                 QObject* parent = nullptr);
  // A reply still streaming (the app is quitting) is stopped and saved as it is.
  ~ChatController() override;

  // ---- model ----
  void loadModel(const EngineLoadOptions& opts);
  bool modelReady() const { return model_.has_value(); }
  // Reloads the model last asked for with the VRAM budget and caching policy the
  // settings now hold (AppSettings::offloadChanged calls it, once per change of
  // the settings dialog): at once when no reply runs, else when the reply in
  // progress ends or is stopped, so the reply is stored whole. Says so through
  // reloadScheduled / modelReloading. False when no model was asked for or the
  // settings match the ones it was loaded with (nothing to do).
  bool reloadWithSettings();
  // Loads opts (the loaded model again, e.g. with its new predictor) once no
  // reply runs: at once when idle, else when the reply in progress ends or is
  // stopped. `what` names the change for the status bar ("its new predictor").
  void reloadWhenIdle(const EngineLoadOptions& opts, const QString& what);
  // Another model: loaded at once when idle; while a reply streams, when it ends
  // (reloadScheduled says so; the reply is never stopped for it).
  void switchModelWhenIdle(const EngineLoadOptions& opts);
  bool reloadPending() const { return reload_pending_; }
  const std::optional<LoadedModelInfo>& model() const { return model_; }

  // A database moechat may not write, shown from a copy: from then on every change
  // (a message, a new, renamed, duplicated or deleted chat, settings) is refused
  // with `why` through error(), before anything is written.
  void setReadOnly(const QString& why);
  bool readOnly() const { return !read_only_why_.isEmpty(); }
  const QString& readOnlyReason() const { return read_only_why_; }

  // ---- conversations ----
  qint64 current() const { return current_; }
  void openConversation(qint64 id);
  qint64 newConversation();
  // A copy of the chat as shown ("<title> (copy)"), opened; 0 when it could not be made.
  qint64 duplicateConversation(qint64 id);
  // Soft delete; undoDelete restores the messages. The conversation's recorded
  // traces (learning from use) are removed at once and are not restored.
  bool deleteConversation(qint64 id);
  bool undoDelete(qint64 id);
  // Deletes the soft-deleted conversations for good (and any traces left).
  int64_t purgeDeleted();

  // ---- learning from use (docs/predictor.md) ----
  // The model file's SHA-256 for a path (ModelRegistry); the demo's is known.
  // Unset, or empty for a model not hashed yet: its replies are not recorded.
  void setModelHashLookup(std::function<std::string(const std::string& path)> lookup);
  UseTraceStore useTraces() const;
  // Merges the model's recorded traces into one file (in the traces folder)
  // and returns its path; empty when there are none. For the predictor wizard.
  QString recordedTracesFor(const QString& model_sha256) const;
  // The current conversation as the chat shows it: while another reply to the
  // last turn streams, that reply in place of the turn's shown one.
  std::vector<Message> messages() const;
  void setSystemPrompt(const QString& text);
  QString systemPrompt() const;
  // The current conversation's own sampling (nullopt: it uses the defaults).
  std::optional<SamplingDefaults> ownSampling() const;
  void clearSampling();
  // Sampling of the current conversation: its override, or the defaults.
  SamplingDefaults sampling() const;
  void setSampling(const SamplingDefaults& s);

  // ---- replies ----
  bool busy() const { return reply_id_ != 0; }
  qint64 streamingReply() const { return reply_id_; }
  qint64 streamingConversation() const { return reply_conversation_; }
  // Saves the user's message and starts a reply. False (and nothing saved)
  // when busy, when no model is loaded, or when text is blank.
  bool send(const QString& text);
  void stop();
  // Another reply to the last turn, kept beside the earlier ones; it becomes
  // the shown one when it completes or is stopped with some text.
  bool regenerate();
  // The user message gets `text` and a new reply; the replies it had stay as
  // alternatives of its turn (ConversationStore::editForResend), later turns go.
  bool editAndResend(qint64 message_id, const QString& text);
  // Shows the turn's previous (step -1) or next (+1) reply instead of
  // message_id; prompts use the shown one from then on. False when busy or
  // there is none that way.
  bool showAlternative(qint64 message_id, int step);

 signals:
  void modelLoading(double fraction, const QString& stage);
  void modelLoaded(const moe::LoadedModelInfo& info);
  void modelFailed(const QString& reason);
  // A settings change waits for the reply in progress: `what` says so ("Demo
  // model reloads with a 12.0 GB budget when this reply ends…"); empty: the
  // settings went back to the loaded ones, no reload waits any more.
  void reloadScheduled(const QString& what);
  // The model is being reloaded for a settings change ("Reloading Demo model
  // with a 12.0 GB budget…"); modelLoaded or modelFailed follows.
  void modelReloading(const QString& what);
  void conversationsChanged();
  void conversationOpened(qint64 id);  // the view re-reads messages()
  void messageAdded(const moe::Message& m);
  void replyText(qint64 message_id, const QString& text_so_far);
  void replyFinished(const moe::Message& m);
  // The turn of `replaced` now shows `m` (showAlternative).
  void messageReplaced(qint64 replaced, const moe::Message& m);
  void busyChanged(bool busy);
  // A model's recorded traces reached UseTraceStore::kRetrainSuggestTokens
  // (said once per model, remembered in the settings).
  void retrainSuggested(const QString& model_sha256, qint64 tokens);
  void error(const QString& message);
  // The reply just finished was written without the chat's `messages` oldest messages:
  // with them the prompt and the reply did not fit the model's context.
  void historyLeftOut(int messages);

 private:
  // A new turn, or another reply to the turn of alternative_of.
  void startReply(qint64 alternative_of = 0);
  void checkpoint();
  void onText(qint64 reply_id, const QString& chunk);
  void onFinished(qint64 reply_id, const EngineReplyStats& stats);
  void onFailed(qint64 reply_id, const QString& reason);
  void finish(MessageState state, const ReplyStats& stats);
  // The settings changed while a reply ran: reload now that it is over.
  void reloadIfPending();
  // What a reload with the current settings changes, in words ("with a 12.0 GB budget").
  QString reloadChange(const EngineLoadOptions& loaded) const;
  std::vector<ChatMessage> history(qint64 conversation_id) const;
  QString tracePathFor(qint64 conversation_id) const;
  void afterRecording(qint64 conversation_id, const EngineReplyStats& stats);
  // Runs a write to the chat database; when it fails (disk full, read-only or
  // corrupt file) emits error() naming `action` and returns false. What the
  // database already holds is untouched; no exception leaves a slot.
  bool saved(const QString& action, const std::function<void()>& write);
  // saved(), refused first (error() naming action, false) in read-only mode.
  bool written(const QString& action, const std::function<void()>& write);

  ConversationStore& store_;
  EngineHost& engine_;
  AppSettings& settings_;
  std::optional<LoadedModelInfo> model_;
  std::optional<EngineLoadOptions> load_opts_;      // the last load asked for (reloads keep all but settings)
  bool reload_pending_ = false;                     // waits for the reply in progress
  std::optional<EngineLoadOptions> deferred_load_;  // reloadWhenIdle's, while reload_pending_
  QString deferred_what_;
  bool deferred_switch_ = false;  // deferred_load_ is another model, not a reload
  bool reload_queued_ = false;    // offloadChanged seen, handled on the next event loop turn
  qint64 current_ = 0;
  qint64 reply_id_ = 0;  // the streaming assistant message (0: idle)
  qint64 reply_conversation_ = 0;
  QString reply_text_;
  QElapsedTimer since_checkpoint_;
  qsizetype checkpointed_chars_ = 0;
  bool checkpoint_failed_ = false;  // reported once per reply
  std::mt19937_64 seeds_{std::random_device{}()};
  std::function<std::string(const std::string&)> model_hash_;
  QString read_only_why_;
};

}  // namespace moe
