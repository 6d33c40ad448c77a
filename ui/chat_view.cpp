#include "ui/chat_view.h"

#include "ui/code_highlight.h"

#include <QApplication>
#include <QClipboard>
#include <QHBoxLayout>
#include <QLabel>
#include <QScrollBar>
#include <QTextDocument>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <cstring>

namespace moe {
namespace {

QString roleTitle(const QString& role) {
  if (role == "user") return "You";
  if (role == "assistant") return "Assistant";
  return "System";
}

QToolButton* actionButton(const QString& text, const QString& tip, QWidget* parent) {
  auto* b = new QToolButton(parent);
  b->setText(text);
  b->setToolTip(tip);
  b->setAutoRaise(true);
  return b;
}

// "copy-code:N": the link after the Nth fenced code block (0-based).
constexpr char kCopyCodeScheme[] = "copy-code:";

// The closed fenced code blocks (``` ... ```) of a message, in order, as their text,
// and the Markdown with a "Copy code" link on the line after each.
struct CodeBlocks {
  QStringList code;
  QString markdown;
};

CodeBlocks withCopyLinks(const QString& markdown) {
  CodeBlocks out;
  const QStringList lines = markdown.split('\n');
  QStringList kept, block;
  bool in_block = false;
  for (const QString& line : lines) {
    kept << line;
    const bool fence = line.trimmed().startsWith(QStringLiteral("```"));
    if (!in_block) {
      in_block = fence;
      block.clear();
    } else if (fence) {
      in_block = false;
      out.code << block.join('\n');
      kept << QString("[Copy code](%1%2)").arg(kCopyCodeScheme).arg(out.code.size() - 1);
    } else {
      block << line;
    }
  }
  out.markdown = kept.join('\n');
  return out;
}

// Every line break outside fenced code as a Markdown hard break (two trailing spaces).
QString withHardLineBreaks(const QString& markdown) {
  QStringList lines = markdown.split('\n');
  bool in_fence = false;
  for (QString& line : lines) {
    const QString t = line.trimmed();
    if (t.startsWith("```") || t.startsWith("~~~")) {
      in_fence = !in_fence;
      continue;
    }
    if (!in_fence && !t.isEmpty()) line += "  ";
  }
  return lines.join('\n');
}

// Markdown as HTML for the label, with any HTML in the text shown as the text it
// is: QLabel's own Markdown mode passes HTML through, so a tag typed in a message
// would vanish from the view.
// Code blocks get the syntax colours for `background`.
QString markdownAsHtml(const QString& markdown, const QColor& background) {
  QTextDocument doc;
  doc.setMarkdown(markdown, QTextDocument::MarkdownFeatures(QTextDocument::MarkdownDialectGitHub |
                                                            QTextDocument::MarkdownNoHTML));
  highlightCodeBlocks(doc, CodeColors::forBackground(background));
  return doc.toHtml();
}

}  // namespace

MessageBubble::MessageBubble(const MessageItem& m, QWidget* parent) : QFrame(parent), m_(m) {
  setObjectName(m.role == "user" ? "userBubble" : "assistantBubble");
  setFrameShape(QFrame::StyledPanel);
  setAutoFillBackground(true);
  // A role, not a colour, so a theme change repaints the bubble too.
  setBackgroundRole(m.role == "user" ? QPalette::AlternateBase : QPalette::Base);

  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(10, 6, 10, 6);
  auto* head = new QHBoxLayout;
  auto* who = new QLabel("<b>" + roleTitle(m.role) + "</b>", this);
  head->addWidget(who);
  head->addStretch(1);
  copy_ = actionButton("Copy", "Copy this message as text", this);
  head->addWidget(copy_);
  connect(copy_, &QToolButton::clicked, this, [this] { emit copyRequested(m_.id); });
  if (m.role == "user") {
    edit_ =
        actionButton("Edit", "Edit this message and send it again (the replies after it are replaced)", this);
    head->addWidget(edit_);
    connect(edit_, &QToolButton::clicked, this, [this] { emit editRequested(m_.id); });
  } else if (m.role == "assistant") {
    regenerate_ = actionButton("Regenerate", "Answer the last message again", this);
    regenerate_->setVisible(false);
    head->addWidget(regenerate_);
    connect(regenerate_, &QToolButton::clicked, this, [this] { emit regenerateRequested(m_.id); });
    if (m.alternatives > 1) addPager(head);
  }
  v->addLayout(head);

  body_ = new QLabel(this);
  body_->setObjectName("messageBody");
  body_->setTextFormat(Qt::RichText);
  body_->setWordWrap(true);
  body_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::LinksAccessibleByMouse);
  body_->setOpenExternalLinks(false);
  connect(body_, &QLabel::linkActivated, this, [this](const QString& link) {
    if (!link.startsWith(kCopyCodeScheme)) return;
    bool ok = false;
    const int i = link.mid(int(std::strlen(kCopyCodeScheme))).toInt(&ok);
    if (ok && i >= 0 && i < code_blocks_.size()) QApplication::clipboard()->setText(code_blocks_[i]);
  });
  v->addWidget(body_);
  footer_ = new QLabel(this);
  footer_->setObjectName("messageFooter");
  footer_->setForegroundRole(QPalette::PlaceholderText);
  v->addWidget(footer_);
  setText(m.text);
  setFooter(m.footer, m.state);
}

void MessageBubble::addPager(QLayout* row) {
  previous_ = actionButton("<", "Show the previous reply to this message", this);
  previous_->setObjectName("previousReply");
  auto* place = new QLabel(QString("%1/%2").arg(m_.alternative).arg(m_.alternatives), this);
  place->setObjectName("replyPager");
  place->setToolTip("This reply's place among the replies to this message");
  next_ = actionButton(">", "Show the next reply to this message", this);
  next_->setObjectName("nextReply");
  row->addWidget(previous_);
  row->addWidget(place);
  row->addWidget(next_);
  connect(previous_, &QToolButton::clicked, this, [this] { emit alternativeRequested(m_.id, -1); });
  connect(next_, &QToolButton::clicked, this, [this] { emit alternativeRequested(m_.id, +1); });
  setActionsEnabled(true);
}

void MessageBubble::setText(const QString& text) {
  m_.text = text;
  // A message the user typed keeps the line breaks typed into it (Markdown would
  // join its lines into one paragraph).
  CodeBlocks blocks = withCopyLinks(m_.role == "user" ? withHardLineBreaks(text) : text);
  code_blocks_ = std::move(blocks.code);
  body_->setText(markdownAsHtml(text.isEmpty() && m_.state == "streaming" ? QString("…") : blocks.markdown,
                                palette().color(backgroundRole())));
}

void MessageBubble::changeEvent(QEvent* event) {
  QFrame::changeEvent(event);
  // A theme change: the code's colours are chosen for the background.
  if (event->type() == QEvent::PaletteChange && body_) setText(m_.text);
}

void MessageBubble::setFooter(const QString& footer, const QString& state) {
  m_.footer = footer;
  m_.state = state;
  QString line = footer;
  if (state == "interrupted")
    line = "Interrupted (the app stopped while this reply was being written)" +
           (footer.isEmpty() ? QString() : " · " + footer);
  else if (state == "stopped")
    line = "Stopped" + (footer.isEmpty() ? QString() : " · " + footer);
  else if (state == "error")
    line = "Failed" + (footer.isEmpty() ? QString() : ": " + footer);
  footer_->setText(line);
  footer_->setVisible(!line.isEmpty());
}

void MessageBubble::setRegenerateVisible(bool on) {
  if (regenerate_) regenerate_->setVisible(on);
}

void MessageBubble::setActionsEnabled(bool on) {
  if (edit_) edit_->setEnabled(on);
  if (regenerate_) regenerate_->setEnabled(on);
  if (previous_) previous_->setEnabled(on && m_.alternative > 1);
  if (next_) next_->setEnabled(on && m_.alternative < m_.alternatives);
}

QString MessageBubble::renderedText() const {
  QTextDocument doc;
  doc.setHtml(body_->text());
  return doc.toPlainText();
}

void MessageBubble::setFound(bool found) {
  found_ = found;
  // A plain box is drawn in the foreground role's colour; the labels inside keep theirs.
  setFrameShape(found ? QFrame::Box : QFrame::StyledPanel);
  setFrameShadow(found ? QFrame::Plain : QFrame::Raised);
  setLineWidth(found ? 2 : 1);
  setForegroundRole(found ? QPalette::Highlight : QPalette::WindowText);
}

ChatView::ChatView(QWidget* parent) : QScrollArea(parent) {
  setObjectName("chatView");
  setWidgetResizable(true);
  setFrameShape(QFrame::NoFrame);
  content_ = new QWidget(this);
  column_ = new QVBoxLayout(content_);
  column_->setContentsMargins(12, 12, 12, 12);
  column_->setSpacing(8);
  placeholder_ = new QLabel(content_);
  placeholder_->setObjectName("chatPlaceholder");
  placeholder_->setAlignment(Qt::AlignCenter);
  placeholder_->setWordWrap(true);
  placeholder_->setTextFormat(Qt::RichText);
  column_->addWidget(placeholder_);
  column_->addStretch(1);
  setWidget(content_);
  // Follow the end whenever the content grows, unless the user has scrolled away
  // from it; scrolling back to the end follows again.
  connect(verticalScrollBar(), &QScrollBar::rangeChanged, this, [this] {
    if (following_) scrollToEnd();
  });
  connect(verticalScrollBar(), &QScrollBar::valueChanged, this, [this] {
    if (!scrolling_) following_ = atEnd();
  });
  render_timer_.setSingleShot(true);
  render_timer_.setInterval(kRenderMs);
  connect(&render_timer_, &QTimer::timeout, this, &ChatView::renderPending);
}

void ChatView::setPlaceholder(const QString& html) {
  placeholder_->setText(html);
  placeholder_->setVisible(bubbles_.empty() && !html.isEmpty());
}

void ChatView::setMessages(const std::vector<MessageItem>& messages) {
  render_timer_.stop();
  has_pending_ = false;
  for (auto* b : bubbles_) {
    column_->removeWidget(b);
    b->hide();
    b->deleteLater();
  }
  bubbles_.clear();
  found_id_ = 0;
  for (const auto& m : messages) appendMessage(m);
  placeholder_->setVisible(bubbles_.empty() && !placeholder_->text().isEmpty());
  updateRegenerate();
  following_ = true;  // an opened chat shows its latest message
  scrollToEnd();
}

MessageBubble* ChatView::makeBubble(const MessageItem& m) {
  auto* b = new MessageBubble(m, content_);
  // Shown now, not by the layout's queued show: until then the column measures
  // without it, and a scroll area that settles its scroll bars in between squeezes
  // the messages into the viewport (seen on a loaded machine: 60-line replies cut
  // to 184 px, no scroll bar).
  b->show();
  connect(b, &MessageBubble::copyRequested, this, &ChatView::copyRequested);
  connect(b, &MessageBubble::editRequested, this, &ChatView::editRequested);
  connect(b, &MessageBubble::regenerateRequested, this, &ChatView::regenerateRequested);
  connect(b, &MessageBubble::alternativeRequested, this, &ChatView::alternativeRequested);
  b->setActionsEnabled(!busy_);
  return b;
}

void ChatView::replaceMessage(qint64 id, const MessageItem& m) {
  const auto at = std::find_if(bubbles_.begin(), bubbles_.end(), [&](auto* b) { return b->item().id == id; });
  if (at == bubbles_.end()) return;
  auto* b = makeBubble(m);
  column_->insertWidget(column_->indexOf(*at), b);
  column_->removeWidget(*at);
  (*at)->hide();
  (*at)->deleteLater();
  *at = b;
  updateRegenerate();
}

void ChatView::appendMessage(const MessageItem& m) {
  auto* b = makeBubble(m);
  column_->insertWidget(column_->count() - 1, b);  // before the stretch
  bubbles_.push_back(b);
  placeholder_->setVisible(false);
  updateRegenerate();
  if (m.role == "user") {  // sending shows the message and the reply that follows
    following_ = true;
    scrollToEnd();
  }
}

MessageBubble* ChatView::bubbleFor(qint64 id) const {
  for (auto* b : bubbles_)
    if (b->item().id == id) return b;
  return nullptr;
}

void ChatView::setStreamingText(qint64 id, const QString& text) {
  pending_id_ = id;
  pending_text_ = text;
  has_pending_ = true;
  if (!render_timer_.isActive()) render_timer_.start();
}

void ChatView::renderPending() {
  if (!has_pending_) return;
  has_pending_ = false;
  if (auto* b = bubbleFor(pending_id_)) {
    b->setText(pending_text_);
    ++renders_;
  }
}

void ChatView::finishMessage(qint64 id, const QString& text, const QString& footer, const QString& state) {
  if (has_pending_ && pending_id_ == id) {
    render_timer_.stop();
    has_pending_ = false;
  }
  if (auto* b = bubbleFor(id)) {
    b->setText(text);
    b->setFooter(footer, state);
    ++renders_;
  }
  updateRegenerate();
}

void ChatView::setBusy(bool busy) {
  busy_ = busy;
  for (auto* b : bubbles_) b->setActionsEnabled(!busy);
  updateRegenerate();
}

void ChatView::updateRegenerate() {
  for (auto* b : bubbles_) b->setRegenerateVisible(false);
  if (!bubbles_.empty() && bubbles_.back()->item().role == "assistant" && !busy_)
    bubbles_.back()->setRegenerateVisible(true);
}

void ChatView::clearFound() {
  if (MessageBubble* b = bubbleFor(found_id_)) b->setFound(false);
  found_id_ = 0;
}

bool ChatView::showFound(qint64 id) {
  MessageBubble* target = bubbleFor(id);
  if (!target) return false;
  if (MessageBubble* before = bubbleFor(found_id_)) before->setFound(false);
  found_id_ = id;
  target->setFound(true);
  following_ = false;
  content_->layout()->activate();  // the bubbles' places, before the scroll bar moves
  scrolling_ = true;
  ensureWidgetVisible(target, 0, 24);
  if (target->height() > viewport()->height())  // a long message: its start
    verticalScrollBar()->setValue(target->y());
  scrolling_ = false;
  return true;
}

bool ChatView::atEnd() const {
  const auto* bar = verticalScrollBar();
  return bar->value() >= bar->maximum() - 24;
}

void ChatView::scrollToEnd() {
  QScrollBar* bar = verticalScrollBar();
  scrolling_ = true;
  bar->setValue(bar->maximum());
  scrolling_ = false;
}

}  // namespace moe
