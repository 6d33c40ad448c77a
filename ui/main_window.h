// The main window: conversations on the left (search, new, rename, duplicate, delete with
// undo, export), the chat on the right (streaming reply, stop, regenerate,
// edit-and-resend, copy), the live performance strip at the bottom, and a dock
// with the expert-cache heat map. Everything it needs is given to it.
#pragma once

#include <QMainWindow>
#include <QMenu>
#include <functional>
#include <memory>

#include "app/core/conversation_store.h"
#include "app/qt/app_settings.h"
#include "app/qt/chat_controller.h"

class QAction;
class QComboBox;
class QLabel;
class QLineEdit;
class QListView;
class QProgressBar;
class QPushButton;
class QDialog;
class QDockWidget;

namespace moe {

class ChatView;
class Composer;
class ContextButton;
class ConversationListModel;
class ExpertHeatMap;
class PerfStrip;

struct ModelChoice {
  QString name;
  QString path;              // empty: the demo model
  QString predictor_note{};  // e.g. "predictor 71%": its stored predictor; empty without one
};

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  MainWindow(AppSettings& settings, ConversationStore& store, ChatController& chat, EngineHost& engine,
             QWidget* parent = nullptr);
  ~MainWindow() override;

  // Optional collaborators the app wires in (tests may leave them unset).
  void setModelWizardLauncher(std::function<void()> launch);
  // Enables File > Models (the models view).
  void setModelsViewLauncher(std::function<void()> launch);
  // Enables File > Downloads (the downloads view).
  void setDownloadsViewLauncher(std::function<void()> launch);
  // Enables File > Train a predictor.
  void setPredictorWizardLauncher(std::function<void()> launch);
  // The installed models for the model menu. An entry with an empty path gives
  // the demo model's predictor note (the demo entry is always there).
  void setModelListSource(std::function<std::vector<ModelChoice>()> source);
  // Imports a predictor set file (moechat-cli train -o) into the database;
  // returns what to tell the user. Enables File > Import a predictor.
  void setPredictorImporter(std::function<QString(const QString& path)> import);
  // The trained predictor set stored for a model, if any (used by proactive).
  void setPredictorSource(std::function<std::shared_ptr<const PredictorSet>(const ModelChoice&)> source);
  // Opens predictor training for a model (SHA-256) from its recorded traces
  // (ChatController::recordedTracesFor). Unset: the retrain offer names the CLI.
  void setRetrainLauncher(std::function<void(const QString& model_sha256)> launch);
  QWidget* retrainBar() const { return retrain_bar_; }
  void refreshModelList();

  // The model to load at start: the last one used, or the demo model.
  void loadInitialModel();
  void loadModel(const ModelChoice& choice);
  // The loaded model again (its new predictor: `what` says so), once the reply
  // in progress ends or is stopped (ChatController::reloadWhenIdle).
  void reloadModel(const QString& what);

  ChatController& chat() const { return chat_; }
  AppSettings& settings() const { return settings_; }
  ChatView* chatView() const { return chat_view_; }
  Composer* composer() const { return composer_; }
  ConversationListModel* conversationModel() const { return list_model_; }
  QListView* conversationList() const { return list_; }
  // The chat list's context menu for the chat at `row` (rename, duplicate, export,
  // delete); shown at the cursor, or its actions triggered by a test.
  std::unique_ptr<QMenu> conversationMenu(int row);
  QLineEdit* searchField() const { return search_; }
  PerfStrip* perfStrip() const { return perf_; }
  ExpertHeatMap* heatMap() const { return heat_map_; }
  QWidget* undoBar() const { return undo_bar_; }
  // A message that stays above the chat until the user dismisses it (the status
  // bar's messages are replaced by the next one, e.g. the model's load note).
  void showNotice(const QString& text);
  // A chat database moechat may not write, shown from a copy: chats can be read,
  // searched and exported; sending, new chats, renames and deletes are refused, and
  // `why` says so above the chat and in the message field.
  void setReadOnly(const QString& why);
  QWidget* noticeBar() const { return notice_bar_; }
  ContextButton* contextButton() const { return context_button_; }
  void openSettings();
  void editConversationSettings();
  // The dialog openSettings() shows, not yet shown (screenshots and tests).
  std::unique_ptr<QDialog> makeSettingsDialog();
  void exportCurrent(const QString& path);  // .md or .json by extension
  // The save dialog, suggesting a file named after the chat's title.
  QString askExportPath(const QString& extension, const QString& filter);

 protected:
  // A new palette (theme) re-renders the banner, whose link colour is set in its text.
  void changeEvent(QEvent* event) override;

 private:
  static constexpr int kModelNameRole = Qt::UserRole + 1;  // the model combo: the name without its note

  void buildActions();
  QWidget* buildSidebar();
  QWidget* buildChatPane();
  QWidget* buildNoticeBar(QWidget* parent);
  void showConversation(qint64 id);
  void showTitle();       // the current conversation's title in the header
  void showReplyState();  // Stop, the composer's wait and the list's mark: whose reply streams
  void stopShownReply();  // stops the reply of the chat on screen, and no other
  void endEditing();      // the banner, the frame and Resend go; the composer sends anew
  void selectConversationRow(qint64 id);
  void deleteSelected();
  EngineLoadOptions loadOptionsFor(const ModelChoice& choice);  // from the settings
  void onModelLoaded(const LoadedModelInfo& info);
  void showModelStatus(const LoadedModelInfo& info);   // the status bar's model line
  ContextButton* buildContextButton(QWidget* parent);  // beside the model combo
  void showContextChoices();                           // the loaded model's context and the lengths it offers
  void onReplyFinished(const Message& m);
  void updateBanner();
  void editMessage(qint64 id);
  void buildRetrainOffer();

  AppSettings& settings_;
  ConversationStore& store_;
  ChatController& chat_;
  EngineHost& engine_;
  std::function<void()> launch_wizard_;
  std::function<void()> launch_predictor_wizard_;
  std::function<void()> launch_models_view_;
  QAction* models_view_action_ = nullptr;
  std::function<void()> launch_downloads_view_;
  QAction* downloads_view_action_ = nullptr;
  QAction* train_predictor_action_ = nullptr;
  std::function<std::vector<ModelChoice>()> model_source_;
  std::function<std::shared_ptr<const PredictorSet>(const ModelChoice&)> predictor_source_;
  std::function<QString(const QString&)> import_predictor_;
  QAction* import_predictor_action_ = nullptr;

  ConversationListModel* list_model_ = nullptr;
  QListView* list_ = nullptr;
  QLineEdit* search_ = nullptr;
  QWidget* undo_bar_ = nullptr;
  QLabel* undo_label_ = nullptr;
  qint64 undo_id_ = 0;
  QLabel* title_ = nullptr;
  QComboBox* model_combo_ = nullptr;
  ContextButton* context_button_ = nullptr;  // the loaded model's context length
  QLabel* banner_ = nullptr;
  QWidget* notice_bar_ = nullptr;
  QLabel* notice_text_ = nullptr;
  ChatView* chat_view_ = nullptr;
  Composer* composer_ = nullptr;
  PerfStrip* perf_ = nullptr;
  ExpertHeatMap* heat_map_ = nullptr;
  QDockWidget* heat_dock_ = nullptr;
  QProgressBar* load_bar_ = nullptr;
  QLabel* model_status_ = nullptr;
  QString reloading_;  // "Reloading <model> with …" while a settings reload runs
  qint64 editing_message_ = 0;
  // Learning from use: "enough recorded, train a predictor?" in the status bar.
  std::function<void(const QString&)> launch_retrain_;
  QWidget* retrain_bar_ = nullptr;
  QLabel* retrain_label_ = nullptr;
  QPushButton* retrain_button_ = nullptr;
  QString retrain_sha_;
};

// The line under an assistant reply: tokens, speeds, time to first token.
QString replyFooter(const Message& m);

}  // namespace moe
