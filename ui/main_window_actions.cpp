// MainWindow's menus and the collaborators the app wires in (wizards, views, the
// predictor importer, the retrain offer), the model menu: listing, loading and
// reloading models, the context button and the status bar's model line, and the
// dialogs the menus open (settings, the chat's settings, export).
#include <QAction>
#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QStatusBar>
#include <QToolButton>
#include <algorithm>

#include "app/core/chat_export.h"
#include "app/core/demo_model.h"
#include "app/core/fit_words.h"
#include "app/core/load_plan.h"
#include "ui/composer.h"
#include "ui/context_button.h"
#include "ui/conversation_settings_dialog.h"
#include "ui/expert_heat_map.h"
#include "ui/main_window.h"
#include "ui/settings_dialog.h"

namespace moe {
namespace {

QString q(const std::string& s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

}  // namespace

void MainWindow::buildActions() {
  auto* file = menuBar()->addMenu("&File");
  auto* new_chat = file->addAction("New chat", this, [this] { chat_.newConversation(); });
  new_chat->setShortcut(QKeySequence::New);
  file->addAction("Add a model…", this, [this] {
    if (launch_wizard_) launch_wizard_();
  });
  models_view_action_ = file->addAction("Models…", this, [this] {
    if (launch_models_view_) launch_models_view_();
  });
  models_view_action_->setObjectName("modelsViewAction");
  models_view_action_->setEnabled(false);
  downloads_view_action_ = file->addAction("Downloads…", this, [this] {
    if (launch_downloads_view_) launch_downloads_view_();
  });
  downloads_view_action_->setObjectName("downloadsViewAction");
  downloads_view_action_->setEnabled(false);
  import_predictor_action_ = file->addAction("Import a predictor…", this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, "Import a predictor set", QString(), "moechat predictors (*.preds *.moepreds);;All files (*)");
    if (path.isEmpty() || !import_predictor_) return;
    statusBar()->showMessage(import_predictor_(path), 15'000);
    reloadModel("its new predictor");  // use it now (after the reply in progress)
  });
  import_predictor_action_->setEnabled(false);
  train_predictor_action_ = file->addAction("Train a predictor…", this, [this] {
    if (launch_predictor_wizard_) launch_predictor_wizard_();
  });
  train_predictor_action_->setObjectName("trainPredictorAction");
  train_predictor_action_->setEnabled(false);
  file->addAction("Export chat as Markdown…", this,
                  [this] { exportCurrent(askExportPath("md", "Markdown (*.md)")); });
  file->addAction("Export chat as JSON…", this,
                  [this] { exportCurrent(askExportPath("json", "JSON (*.json)")); });
  file->addSeparator();
  auto* quit = file->addAction("Quit", this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  auto* edit = menuBar()->addMenu("&Edit");
  auto* find = edit->addAction("Search chats", this, [this] {
    search_->setFocus();
    search_->selectAll();
  });
  find->setShortcut(QKeySequence::Find);
  auto* stop = edit->addAction("Stop the reply", this, [this] {
    if (chat_.busy() && chat_.streamingConversation() == chat_.current())
      stopShownReply();
    else if (editing_message_) {
      endEditing();
      composer_->setText({});
    }
  });
  stop->setShortcut(Qt::Key_Escape);
  auto* regen = edit->addAction("Regenerate the last reply", this, [this] { chat_.regenerate(); });
  regen->setShortcut(QKeySequence("Ctrl+R"));
  auto* del = edit->addAction("Delete chat", this, &MainWindow::deleteSelected);
  del->setShortcut(QKeySequence("Ctrl+Shift+Backspace"));
  auto* prefs = edit->addAction("Settings…", this, &MainWindow::openSettings);
  prefs->setShortcut(QKeySequence("Ctrl+,"));

  auto* view = menuBar()->addMenu("&View");
  view->addAction(heat_dock_->toggleViewAction());
  auto* theme = view->addMenu("Theme");
  for (const char* t : {"system", "light", "dark"})
    theme->addAction(t, this, [this, t] { settings_.setTheme(t); });
}

void MainWindow::setModelWizardLauncher(std::function<void()> launch) {
  launch_wizard_ = std::move(launch);
  updateBanner();
}

void MainWindow::setModelsViewLauncher(std::function<void()> launch) {
  launch_models_view_ = std::move(launch);
  models_view_action_->setEnabled(static_cast<bool>(launch_models_view_));
}

void MainWindow::setDownloadsViewLauncher(std::function<void()> launch) {
  launch_downloads_view_ = std::move(launch);
  downloads_view_action_->setEnabled(static_cast<bool>(launch_downloads_view_));
}

void MainWindow::setPredictorWizardLauncher(std::function<void()> launch) {
  launch_predictor_wizard_ = std::move(launch);
  train_predictor_action_->setEnabled(static_cast<bool>(launch_predictor_wizard_));
}

void MainWindow::setModelListSource(std::function<std::vector<ModelChoice>()> source) {
  model_source_ = std::move(source);
  refreshModelList();
}

void MainWindow::setPredictorImporter(std::function<QString(const QString&)> import) {
  import_predictor_ = std::move(import);
  import_predictor_action_->setEnabled(static_cast<bool>(import_predictor_));
}

void MainWindow::setPredictorSource(
    std::function<std::shared_ptr<const PredictorSet>(const ModelChoice&)> source) {
  predictor_source_ = std::move(source);
}

void MainWindow::setRetrainLauncher(std::function<void(const QString&)> launch) {
  launch_retrain_ = std::move(launch);
  retrain_button_->setVisible(static_cast<bool>(launch_retrain_));
}

void MainWindow::buildRetrainOffer() {
  retrain_bar_ = new QWidget(this);
  retrain_bar_->setObjectName("retrainBar");
  auto* h = new QHBoxLayout(retrain_bar_);
  h->setContentsMargins(0, 0, 0, 0);
  retrain_label_ = new QLabel(retrain_bar_);
  retrain_button_ = new QPushButton("Train a predictor…", retrain_bar_);
  retrain_button_->setObjectName("retrainButton");
  retrain_button_->hide();
  auto* dismiss = new QToolButton(retrain_bar_);
  dismiss->setText("Not now");
  h->addWidget(retrain_label_);
  h->addWidget(retrain_button_);
  h->addWidget(dismiss);
  statusBar()->addWidget(retrain_bar_, 1);
  retrain_bar_->hide();
  connect(dismiss, &QToolButton::clicked, retrain_bar_, &QWidget::hide);
  connect(retrain_button_, &QPushButton::clicked, this, [this] {
    retrain_bar_->hide();
    if (launch_retrain_) launch_retrain_(retrain_sha_);
  });
  connect(&chat_, &ChatController::retrainSuggested, this, [this](const QString& sha, qint64 tokens) {
    retrain_sha_ = sha;
    QString text = QString("%1 tokens of your chats are recorded: enough to train a predictor for this model")
                       .arg(tokens);
    text += launch_retrain_ ? QString(".") : QString(" (moechat-cli train).");
    retrain_label_->setText(text);
    retrain_bar_->show();
  });
}

void MainWindow::refreshModelList() {
  const QSignalBlocker block(model_combo_);
  const QString current = chat_.model() ? q(chat_.model()->path) : settings_.lastModelPath();
  model_combo_->clear();
  auto add = [this](const ModelChoice& m) {
    // The note shows in the menu; the name alone is what a load reports.
    model_combo_->addItem(m.predictor_note.isEmpty() ? m.name : m.name + " · " + m.predictor_note, m.path);
    const int i = model_combo_->count() - 1;
    model_combo_->setItemData(i, m.name, kModelNameRole);
    model_combo_->setItemData(
        i,
        m.predictor_note.isEmpty()
            ? QString("No trained predictor (File > Train a predictor)")
            : QString("Has a trained predictor (%1), used under the proactive policy").arg(m.predictor_note),
        Qt::ToolTipRole);
  };
  std::vector<ModelChoice> models = model_source_ ? model_source_() : std::vector<ModelChoice>{};
  ModelChoice demo{QString::fromStdString(demoModelName(appDemoModel())), QString(), QString()};
  for (const auto& m : models)
    if (m.path.isEmpty()) demo.predictor_note = m.predictor_note;
  add(demo);
  for (const auto& m : models)
    if (!m.path.isEmpty()) add(m);
  const int i = model_combo_->findData(current);
  model_combo_->setCurrentIndex(i < 0 ? 0 : i);
}

void MainWindow::loadInitialModel() {
  const QString last = settings_.lastModelPath();
  if (!last.isEmpty() && QFile::exists(last))
    loadModel({QFileInfo(last).fileName(), last});
  else
    loadModel({"Demo model", QString()});
}

void MainWindow::loadModel(const ModelChoice& choice) {
  const EngineLoadOptions o = loadOptionsFor(choice);
  if (chat_.busy()) {  // the reply in progress is not stopped for it: the switch waits
    chat_.switchModelWhenIdle(o);
    return;
  }
  composer_->setEnabled(false);
  reloading_.clear();
  model_status_->setText("Loading " + choice.name + "…");
  chat_.loadModel(o);
}

void MainWindow::reloadModel(const QString& what) {
  if (!chat_.model()) return;
  chat_.reloadWhenIdle(loadOptionsFor({q(chat_.model()->name), q(chat_.model()->path)}), what);
}

EngineLoadOptions MainWindow::loadOptionsFor(const ModelChoice& choice) {
  EngineLoadOptions o;
  o.demo = choice.path.isEmpty();
  o.demo_model = appDemoModel();
  o.model_path = choice.path.toStdString();
  o.policy = settings_.cachePolicy().toStdString();
  o.vram_budget_bytes = settings_.vramBudgetBytes();
  o.n_ctx = settings_.contextLength(choice.path);
  if (predictor_source_) {
    try {
      o.predictor_set = predictor_source_(choice);
    } catch (const std::exception& e) {
      statusBar()->showMessage(QString("The stored predictor could not be read: %1").arg(e.what()), 10'000);
    }
  }
  return o;
}

void MainWindow::onModelLoaded(const LoadedModelInfo& info) {
  load_bar_->hide();
  composer_->setEnabled(true);
  composer_->editor()->setFocus();
  composer_->setThinkingSwitch(info.thinking_switch, settings_.thinking());
  settings_.setLastModelPath(q(info.path));
  reloading_.clear();
  showModelStatus(info);
  if (!info.offload_note.empty()) statusBar()->showMessage(q(info.offload_note), 15'000);
  refreshModelList();
  showContextChoices();
  updateBanner();
  heat_map_->refresh();
}

ContextButton* MainWindow::buildContextButton(QWidget* parent) {
  context_button_ = new ContextButton(parent);
  // The same per-model setting as the settings dialog's: a change reloads the model
  // (AppSettings::offloadChanged), after the reply in progress if one runs.
  connect(context_button_, &ContextButton::contextChosen, this, [this](int tokens) {
    if (chat_.model()) settings_.setContextLength(q(chat_.model()->path), tokens);
  });
  connect(context_button_, &ContextButton::otherRequested, this, &MainWindow::openSettings);
  connect(&settings_, &AppSettings::offloadChanged, this, &MainWindow::showContextChoices);
  return context_button_;
}

void MainWindow::showContextChoices() {
  if (!chat_.model()) {
    context_button_->clearModel();
    return;
  }
  const LoadedModelInfo& info = *chat_.model();
  const int trained = info.shape && info.shape->config.n_ctx_train > 0 ? info.shape->config.n_ctx_train
                                                                       : AppSettings::kMaxContextLength;
  // The setting, which a reload waiting for the reply in progress has not applied yet.
  const int wanted = std::min(settings_.contextLength(q(info.path)), trained);
  std::function<QString(int)> note;
  if (info.shape)
    note = [this, shape = *info.shape, device = info.device, demo = info.demo](int n) {
      PlanRequest request;
      request.budget = BudgetSetting::fromAppSetting(settings_.vramBudgetBytes());
      request.policy = parsePolicy(settings_.cachePolicy().toStdString());
      request.n_ctx = n;
      request.demo = demo;
      const LoadPlan plan = resolveLoadPlan(request, shape, device);
      QString text = QString("KV cache %1").arg(q(formatBytes(plan.fit.kv_bytes)));
      if (!plan.loads()) text += QString(" · does not fit the budget");
      return text;
    };
  context_button_->showModel(q(info.name), wanted, trained, note);
}

void MainWindow::showModelStatus(const LoadedModelInfo& info) {
  model_status_->setText(QString("%1 · %2 · %3 layers × %4 experts (%5 used) · %6 · %7 backend")
                             .arg(q(info.name), q(info.architecture))
                             .arg(info.n_layer)
                             .arg(info.n_expert)
                             .arg(info.n_expert_used)
                             .arg(info.predictor.empty()
                                      ? q(info.policy)
                                      : q(info.policy) + " + " + q(info.predictor) + " predictor")
                             .arg(q(info.backend)));
  model_status_->setToolTip(q(info.offload_note));
}

void MainWindow::editConversationSettings() {
  if (!chat_.current()) chat_.newConversation();
  ConversationSettingsDialog dlg(chat_.systemPrompt(), chat_.ownSampling(), settings_.sampling(), this);
  if (dlg.exec() != QDialog::Accepted) return;
  chat_.setSystemPrompt(dlg.systemPrompt());
  if (auto s = dlg.sampling())
    chat_.setSampling(*s);
  else
    chat_.clearSampling();
}

void MainWindow::openSettings() { makeSettingsDialog()->exec(); }

std::unique_ptr<QDialog> MainWindow::makeSettingsDialog() {
  SettingsContext ctx;
  if (chat_.model()) {
    ctx.model = chat_.model()->shape;    // described by the engine worker when it loaded the model
    ctx.device = chat_.model()->device;  // what its plan was resolved against
    ctx.demo = chat_.model()->demo;
    ctx.model_name = q(chat_.model()->name);
    ctx.model_path = q(chat_.model()->path);
    ctx.n_ctx = settings_.contextLength(ctx.model_path);
    ctx.model_loaded = true;
    ctx.reply_running = chat_.busy();
  }
  ctx.host_available_bytes = availableHostRam();
  return std::make_unique<SettingsDialog>(settings_, ctx, this);
}

QString MainWindow::askExportPath(const QString& extension, const QString& filter) {
  const auto c = chat_.current() ? store_.get(chat_.current()) : std::nullopt;
  const std::string name = exportFileName(c ? c->title : std::string(), extension.toStdString());
  return QFileDialog::getSaveFileName(this, "Export", q(name), filter);
}

void MainWindow::exportCurrent(const QString& path) {
  if (path.isEmpty() || !chat_.current()) return;
  const auto c = store_.get(chat_.current());
  if (!c) return;
  const auto msgs = store_.messagesWithAlternatives(c->id);
  const std::string text = path.endsWith(".json", Qt::CaseInsensitive) ? conversationToJson(*c, msgs)
                                                                       : conversationToMarkdown(*c, msgs);
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) ||
      f.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size())) {
    QMessageBox::warning(this, "Export failed", QString("Could not write %1: %2").arg(path, f.errorString()));
    return;
  }
  statusBar()->showMessage("Exported to " + path, 5000);
}

}  // namespace moe
