#include "ui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QSplitter>
#include <QStatusBar>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include "app/core/demo_model.h"
#include "ui/chat_view.h"
#include "ui/composer.h"
#include "ui/context_button.h"
#include "ui/conversation_list_model.h"
#include "ui/elided_label.h"
#include "ui/expert_heat_map.h"
#include "ui/perf_strip.h"
#include "ui/theme.h"

namespace moe {
namespace {

constexpr int kUndoMs = 10'000;
const char* kRandomDemoBanner =
    "<b>Demo model</b>: random weights. It shows the machinery (routing, expert cache, speed), not "
    "language. ";
const char* kTrainedDemoBanner =
    "<b>Demo model</b>: 15 million parameters trained on the Brown corpus. It writes simple English and "
    "shows the machinery (routing, expert cache, speed); it knows little. ";

QString q(const std::string& s) { return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size())); }

MessageItem toItem(const Message& m) {
  MessageItem it;
  it.id = m.id;
  it.role = toString(m.role);
  it.text = q(m.text);
  it.state = toString(m.state);
  it.footer = m.role == Role::Assistant ? replyFooter(m) : QString();
  it.alternative = m.alternative;
  it.alternatives = m.alternatives;
  return it;
}

}  // namespace

QString replyFooter(const Message& m) {
  QStringList parts;
  if (!m.answered.empty()) {  // kept by edit-and-resend: it answered the message before the edit
    QString was = q(m.answered).simplified();
    if (was.size() > 60) was = was.left(59) + QStringLiteral("…");
    parts << QStringLiteral("answer to your earlier wording, “%1”").arg(was);
  }
  if (m.state == MessageState::Error) {
    parts << q(m.stats.stop_reason);
    return parts.join(" · ");
  }
  if (m.stats.completion_tokens) parts << QString("%1 tokens").arg(*m.stats.completion_tokens);
  if (m.stats.decode_tps) parts << QString("%1 tok/s").arg(*m.stats.decode_tps, 0, 'f', 1);
  if (m.stats.prefill_tps) parts << QString("prompt %1 tok/s").arg(*m.stats.prefill_tps, 0, 'f', 0);
  if (m.stats.ttft_ms) parts << QString("first token %1 ms").arg(*m.stats.ttft_ms, 0, 'f', 0);
  return parts.join(" · ");
}

MainWindow::MainWindow(AppSettings& settings, ConversationStore& store, ChatController& chat,
                       EngineHost& engine, QWidget* parent)
    : QMainWindow(parent), settings_(settings), store_(store), chat_(chat), engine_(engine) {
  setWindowTitle("moechat");
  setObjectName("mainWindow");
  setStatusBar(new ElidingStatusBar(this));  // messages stop short of the model line
  list_model_ = new ConversationListModel(store_, this);

  auto* split = new QSplitter(this);
  split->addWidget(buildSidebar());
  split->addWidget(buildChatPane());
  split->setStretchFactor(1, 1);
  split->setSizes({260, 760});
  auto* central = new QWidget(this);
  auto* v = new QVBoxLayout(central);
  v->setContentsMargins(0, 0, 0, 0);
  v->setSpacing(0);
  v->addWidget(split, 1);
  InferenceWorker* worker = engine_.worker();
  perf_ = new PerfStrip([worker] { return worker->counters(); }, central);
  perf_->setDetailsShown(settings_.perfDetails());
  connect(perf_, &PerfStrip::detailsToggled, this, [this](bool shown) { settings_.setPerfDetails(shown); });
  v->addWidget(perf_);
  setCentralWidget(central);

  heat_map_ = new ExpertHeatMap([worker] { return worker->residency(); }, this);
  heat_dock_ = new QDockWidget("Expert cache", this);
  heat_dock_->setToolTip(
      "One row per layer, one cell per expert: green ready, amber loading, grey not cached");
  heat_dock_->setObjectName("heatDock");
  heat_dock_->setWidget(heat_map_);
  addDockWidget(Qt::RightDockWidgetArea, heat_dock_);
  resizeDocks({heat_dock_}, {200}, Qt::Horizontal);

  load_bar_ = new QProgressBar(this);
  load_bar_->setRange(0, 100);
  load_bar_->setMaximumWidth(160);
  load_bar_->hide();
  model_status_ = new ElidedLabel(this);  // shortened, never pushing the window wider
  model_status_->setObjectName("modelStatus");
  statusBar()->addPermanentWidget(model_status_);
  statusBar()->addPermanentWidget(load_bar_);
  buildActions();
  buildRetrainOffer();

  connect(&chat_, &ChatController::conversationsChanged, this, [this] {
    list_model_->reload();
    selectConversationRow(chat_.current());
    showTitle();
  });
  connect(list_model_, &ConversationListModel::dataChanged, this, &MainWindow::showTitle);  // a rename
  connect(&chat_, &ChatController::conversationOpened, this, &MainWindow::showConversation);
  connect(&chat_, &ChatController::messageAdded, this, [this](const Message& m) {
    if (m.conversation_id == chat_.current()) chat_view_->appendMessage(toItem(m));
  });
  connect(&chat_, &ChatController::replyText, this, [this](qint64 id, const QString& text) {
    if (chat_.streamingConversation() == chat_.current()) chat_view_->setStreamingText(id, text);
  });
  connect(&chat_, &ChatController::replyFinished, this, &MainWindow::onReplyFinished);
  connect(&chat_, &ChatController::messageReplaced, this, [this](qint64 replaced, const Message& m) {
    if (m.conversation_id == chat_.current()) chat_view_->replaceMessage(replaced, toItem(m));
  });
  connect(&chat_, &ChatController::busyChanged, this, &MainWindow::showReplyState);
  connect(&chat_, &ChatController::error, this,
          [this](const QString& why) { showNotice("Reply failed: " + why); });
  connect(&chat_, &ChatController::historyLeftOut, this, [this](int messages) {
    const int n_ctx = chat_.model() ? chat_.model()->n_ctx : 0;
    showNotice(
        QStringLiteral("The last reply did not see the %1 oldest %2 of this chat: with them the prompt "
                       "would not fit the model's context of %3 tokens. They are still saved here.")
            .arg(messages)
            .arg(messages == 1 ? QStringLiteral("message") : QStringLiteral("messages"))
            .arg(n_ctx));
  });
  connect(&chat_, &ChatController::modelLoading, this, [this](double f, const QString& stage) {
    load_bar_->show();
    load_bar_->setValue(static_cast<int>(f * 100));
    model_status_->setText(reloading_.isEmpty() ? "Loading: " + stage : reloading_);
  });
  connect(&chat_, &ChatController::modelLoaded, this, &MainWindow::onModelLoaded);
  // Settings that change how the model is loaded (budget, policy) reload it.
  connect(&chat_, &ChatController::reloadScheduled, this, [this](const QString& what) {
    if (what.isEmpty()) {
      if (chat_.model()) showModelStatus(*chat_.model());  // the settings went back: nothing waits
      return;
    }
    model_status_->setText(what);  // once: the model's place in the status bar says it
  });
  connect(&chat_, &ChatController::modelReloading, this, [this](const QString& what) {
    composer_->setEnabled(false);
    reloading_ = what;
    model_status_->setText(what);
  });
  connect(&chat_, &ChatController::modelFailed, this, [this](const QString& why) {
    load_bar_->hide();
    reloading_.clear();
    model_status_->setText("No model loaded");
    context_button_->clearModel();
    composer_->setEnabled(true);
    QMessageBox::warning(this, "Could not load the model", why);
    updateBanner();
  });
  connect(&settings_, &AppSettings::themeChanged, this,
          [this] { applyTheme(*qobject_cast<QApplication*>(QApplication::instance()), settings_.theme()); });

  perf_->start();
  heat_map_->start();
  resize(1280, 800);
  showConversation(0);
}

MainWindow::~MainWindow() = default;

QWidget* MainWindow::buildSidebar() {
  auto* side = new QWidget(this);
  auto* v = new QVBoxLayout(side);
  v->setContentsMargins(8, 8, 4, 8);
  auto* new_chat = new QPushButton("New chat", side);
  new_chat->setObjectName("newChatButton");
  new_chat->setToolTip("New chat (Ctrl+N)");
  connect(new_chat, &QPushButton::clicked, this, [this] { chat_.newConversation(); });
  search_ = new QLineEdit(side);
  search_->setObjectName("searchField");
  search_->setPlaceholderText("Search chats (Ctrl+F)");
  search_->setClearButtonEnabled(true);
  connect(search_, &QLineEdit::textChanged, this, [this](const QString& text) {
    list_model_->setSearch(text);
    selectConversationRow(chat_.current());
  });
  list_ = new QListView(side);
  list_->setObjectName("conversationList");
  list_->setModel(list_model_);
  list_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  list_->setTextElideMode(Qt::ElideRight);
  // F2 or a double click renames; a click on the chat already open only opens it.
  list_->setEditTriggers(QAbstractItemView::EditKeyPressed | QAbstractItemView::DoubleClicked);
  list_->setContextMenuPolicy(Qt::CustomContextMenu);
  // A search result opens its chat at the message it matched; clicking it again
  // goes back there.
  auto open_row = [this](const QModelIndex& idx) {
    const qint64 id = list_model_->idAt(idx.row());
    if (id && id != chat_.current()) chat_.openConversation(id);
    if (const qint64 found = list_model_->messageIdAt(idx.row());
        found && chat_view_ && id == chat_.current())
      chat_view_->showFound(found);
  };
  connect(list_->selectionModel(), &QItemSelectionModel::currentChanged, this, open_row);
  connect(list_, &QListView::clicked, this, open_row);
  connect(list_, &QListView::customContextMenuRequested, this, [this](const QPoint& pos) {
    const QModelIndex idx = list_->indexAt(pos);
    if (!idx.isValid()) return;
    if (auto menu = conversationMenu(idx.row())) menu->exec(list_->viewport()->mapToGlobal(pos));
  });

  undo_bar_ = new QFrame(side);
  undo_bar_->setObjectName("undoBar");
  auto* uh = new QHBoxLayout(undo_bar_);
  uh->setContentsMargins(4, 2, 4, 2);
  undo_label_ = new QLabel(undo_bar_);
  undo_label_->setObjectName("undoLabel");
  undo_label_->setTextFormat(Qt::PlainText);  // a chat's title is text, never markup
  auto* undo = new QToolButton(undo_bar_);
  undo->setObjectName("undoButton");
  undo->setText("Undo");
  uh->addWidget(undo_label_, 1);
  uh->addWidget(undo);
  undo_bar_->hide();
  connect(undo, &QToolButton::clicked, this, [this] {
    if (undo_id_ && chat_.undoDelete(undo_id_)) chat_.openConversation(undo_id_);
    undo_id_ = 0;
    undo_bar_->hide();
  });

  v->addWidget(new_chat);
  v->addWidget(search_);
  v->addWidget(list_, 1);
  v->addWidget(undo_bar_);
  return side;
}

QWidget* MainWindow::buildChatPane() {
  auto* pane = new QWidget(this);
  auto* v = new QVBoxLayout(pane);
  v->setContentsMargins(0, 8, 8, 0);
  v->setSpacing(4);
  auto* top = new QHBoxLayout;
  title_ = new ElidedLabel(pane);
  title_->setObjectName("chatTitle");
  title_->setTextFormat(Qt::PlainText);
  QFont tf = title_->font();
  tf.setPointSizeF(tf.pointSizeF() * 1.2);
  tf.setBold(true);
  title_->setFont(tf);
  model_combo_ = new ElidingComboBox(pane);  // a long model name elided, whole on hover
  model_combo_->setObjectName("modelCombo");
  // As wide as its longest entry when there is room, never wider than 220 px of minimum.
  model_combo_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  model_combo_->setMinimumContentsLength(22);
  model_combo_->setToolTip("The model replies come from");
  connect(model_combo_, &QComboBox::activated, this, [this](int i) {
    loadModel({model_combo_->itemData(i, kModelNameRole).toString(), model_combo_->itemData(i).toString()});
  });
  auto* chat_settings = new QToolButton(pane);
  chat_settings->setObjectName("chatSettingsButton");
  chat_settings->setText("Chat settings…");
  chat_settings->setToolTip("This conversation's system prompt and sampling");
  connect(chat_settings, &QToolButton::clicked, this, &MainWindow::editConversationSettings);
  top->addWidget(title_, 1);
  top->addWidget(chat_settings);
  top->addWidget(new QLabel("Model:", pane));
  top->addWidget(model_combo_);
  top->addWidget(buildContextButton(pane));
  v->addLayout(top);

  banner_ = new QLabel(pane);
  banner_->setObjectName("demoBanner");
  banner_->setWordWrap(true);
  banner_->setTextFormat(Qt::RichText);
  banner_->setMargin(6);
  banner_->setAutoFillBackground(true);
  QPalette bp = banner_->palette();
  bp.setColor(QPalette::Window, QColor(0xe0, 0xa3, 0x2e, 60));
  banner_->setPalette(bp);
  connect(banner_, &QLabel::linkActivated, this, [this](const QString&) {
    if (launch_wizard_) launch_wizard_();
  });
  v->addWidget(banner_);
  v->addWidget(buildNoticeBar(pane));

  chat_view_ = new ChatView(pane);
  v->addWidget(chat_view_, 1);
  composer_ = new Composer(pane);
  v->addWidget(composer_);
  connect(composer_, &Composer::sendRequested, this, [this](const QString& text) {
    const qint64 editing = editing_message_;
    if (editing) endEditing();
    const bool ok = editing ? chat_.editAndResend(editing, text) : chat_.send(text);
    if (!ok) {
      composer_->setText(text);  // nothing is lost
      statusBar()->showMessage(
          chat_.modelReady() ? "Wait for the reply to finish, or stop it (Esc)" : "No model is loaded yet",
          5000);
    }
  });
  connect(composer_, &Composer::stopRequested, this, &MainWindow::stopShownReply);
  connect(composer_, &Composer::thinkingToggled, &settings_, &AppSettings::setThinking);
  connect(composer_, &Composer::elsewhereLinkActivated, this, [this](const QString&) {
    if (chat_.busy()) chat_.openConversation(chat_.streamingConversation());
  });
  connect(chat_view_, &ChatView::copyRequested, this, [this](qint64 id) {
    if (auto m = store_.message(id)) QApplication::clipboard()->setText(q(m->text));
    statusBar()->showMessage("Copied", 2000);
  });
  connect(chat_view_, &ChatView::editRequested, this, &MainWindow::editMessage);
  connect(chat_view_, &ChatView::regenerateRequested, this, [this](qint64) { chat_.regenerate(); });
  connect(chat_view_, &ChatView::alternativeRequested, this,
          [this](qint64 id, int step) { chat_.showAlternative(id, step); });
  return pane;
}

void MainWindow::updateBanner() {
  const bool demo = chat_.model() && chat_.model()->demo;
  QString text = appDemoModel() == DemoModel::kTrained ? kTrainedDemoBanner : kRandomDemoBanner;
  // The link's colour is written into the text: QLabel keeps the colour of the
  // palette it first laid the text out with, so a theme change re-sets it.
  if (launch_wizard_)
    text += QString("<a href=\"wizard\" style=\"color: %1\">Get a real model…</a>")
                .arg(palette().color(QPalette::Link).name());
  banner_->setText(text);
  banner_->setVisible(demo);
}

void MainWindow::changeEvent(QEvent* event) {
  QMainWindow::changeEvent(event);
  if ((event->type() == QEvent::PaletteChange || event->type() == QEvent::ApplicationPaletteChange) &&
      banner_)
    updateBanner();
}

QWidget* MainWindow::buildNoticeBar(QWidget* parent) {
  auto* bar = new QFrame(parent);
  bar->setObjectName("noticeBar");
  bar->setFrameShape(QFrame::StyledPanel);
  notice_bar_ = bar;
  auto* h = new QHBoxLayout(notice_bar_);
  h->setContentsMargins(6, 2, 2, 2);
  notice_text_ = new QLabel(notice_bar_);
  notice_text_->setObjectName("noticeText");
  notice_text_->setTextFormat(Qt::PlainText);
  notice_text_->setWordWrap(true);
  auto* dismiss = new QToolButton(notice_bar_);
  dismiss->setObjectName("dismissNotice");
  dismiss->setText("Dismiss");
  dismiss->setAutoRaise(true);
  h->addWidget(notice_text_, 1);
  h->addWidget(dismiss);
  notice_bar_->hide();
  connect(dismiss, &QToolButton::clicked, notice_bar_, &QWidget::hide);
  return notice_bar_;
}

void MainWindow::showNotice(const QString& text) {
  notice_text_->setText(text);
  notice_bar_->show();
}

void MainWindow::setReadOnly(const QString& why) {
  chat_.setReadOnly(why);
  list_model_->setEditable(false);
  composer_->setReadOnly(why);
  if (auto* new_chat = findChild<QPushButton*>("newChatButton")) new_chat->setEnabled(false);
  showNotice(why);
}

void MainWindow::showTitle() {
  const auto c = chat_.current() ? store_.get(chat_.current()) : std::nullopt;
  title_->setText(c ? q(c->title) : QString("moechat"));
  showReplyState();
}

// A reply belongs to its chat: the chat on screen shows Stop only for its own reply;
// while another chat answers, the composer names that chat (a link to it) and waits,
// and the list marks the chat that is answering.
void MainWindow::showReplyState() {
  const qint64 answering = chat_.busy() ? chat_.streamingConversation() : 0;
  const bool here = answering != 0 && answering == chat_.current();
  composer_->setBusy(here);
  chat_view_->setBusy(here);
  QString elsewhere;
  if (answering != 0 && !here) {
    const auto c = store_.get(answering);
    const QString title = c ? q(c->title).toHtmlEscaped() : QStringLiteral("Another chat");
    elsewhere = QStringLiteral(
                    "<b>%1</b> is answering; you can send here when it has finished. "
                    "<a href=\"open\">Open it</a>")
                    .arg(title);
  }
  composer_->setAnsweringElsewhere(elsewhere);
  list_model_->setAnswering(answering);
}

void MainWindow::stopShownReply() {
  if (chat_.busy() && chat_.streamingConversation() == chat_.current()) chat_.stop();
}

void MainWindow::showConversation(qint64 id) {
  std::vector<MessageItem> items;
  if (id)
    for (const auto& m : id == chat_.current() ? chat_.messages() : store_.messages(id))
      items.push_back(toItem(m));
  showTitle();
  chat_view_->setPlaceholder(
      "<h2>Chat with a Mixture-of-Experts model</h2><p>Type a message below. The strip at the bottom shows "
      "what "
      "the expert cache does while the model answers.</p>");
  chat_view_->setMessages(items);
  if (editing_message_ && !chat_view_->bubbleFor(editing_message_))
    endEditing();  // another chat: the edit is dropped
  else if (editing_message_)
    chat_view_->showFound(editing_message_);
  showReplyState();
  selectConversationRow(id);
}

void MainWindow::selectConversationRow(qint64 id) {
  const int row = list_model_->rowOf(id);
  const QSignalBlocker block(list_->selectionModel());
  if (row < 0)
    list_->selectionModel()->clearSelection();
  else
    list_->selectionModel()->setCurrentIndex(list_model_->index(row), QItemSelectionModel::ClearAndSelect);
}

std::unique_ptr<QMenu> MainWindow::conversationMenu(int row) {
  const qint64 id = list_model_->idAt(row);
  if (id == 0) return nullptr;
  auto menu = std::make_unique<QMenu>(this);
  const QModelIndex idx = list_model_->index(row);
  const bool writable = !chat_.readOnly();
  menu->addAction("Rename", [this, idx] { list_->edit(idx); })->setEnabled(writable);
  menu->addAction("Duplicate", [this, id] { chat_.duplicateConversation(id); })->setEnabled(writable);
  menu->addAction("Export as Markdown…", [this] { exportCurrent(askExportPath("md", "Markdown (*.md)")); });
  menu->addAction("Export as JSON…", [this] { exportCurrent(askExportPath("json", "JSON (*.json)")); });
  menu->addSeparator();
  menu->addAction("Delete", [this] { deleteSelected(); })->setEnabled(writable);
  return menu;
}

void MainWindow::deleteSelected() {
  const qint64 id = chat_.current();
  if (!id) return;
  const auto c = store_.get(id);
  if (!chat_.deleteConversation(id)) return;
  undo_id_ = id;
  undo_label_->setText(QString("Deleted “%1”").arg(c ? q(c->title) : QString()));
  undo_bar_->show();
  QTimer::singleShot(kUndoMs, undo_bar_, [this, id] {
    if (undo_id_ == id) {
      undo_id_ = 0;
      undo_bar_->hide();
    }
  });
}

void MainWindow::onReplyFinished(const Message& m) {
  if (m.conversation_id != chat_.current()) return;
  if (!m.shown)  // another reply that failed: its turn shows the reply it showed before
    showConversation(m.conversation_id);
  else
    chat_view_->finishMessage(m.id, q(m.text), replyFooter(m), toString(m.state));
}

void MainWindow::editMessage(qint64 id) {
  const auto m = store_.message(id);
  if (!m || chat_.busy()) return;
  editing_message_ = id;
  composer_->setEditing(true);
  chat_view_->showFound(id);  // framed: the message being edited
  composer_->setText(q(m->text));
}

void MainWindow::endEditing() {
  editing_message_ = 0;
  composer_->setEditing(false);
  chat_view_->clearFound();
}

}  // namespace moe
