#include "ui/composer.h"

#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QVBoxLayout>

namespace moe {

void ComposerEdit::keyPressEvent(QKeyEvent* e) {
  const bool enter = e->key() == Qt::Key_Return || e->key() == Qt::Key_Enter;
  if (enter && !(e->modifiers() & Qt::ShiftModifier)) {
    emit submit();
    return;
  }
  QPlainTextEdit::keyPressEvent(e);
}

Composer::Composer(QWidget* parent) : QWidget(parent) {
  edit_ = new ComposerEdit(this);
  edit_->setObjectName("composerEdit");
  edit_->setPlaceholderText("Message (Enter sends, Shift+Enter for a new line)");
  edit_->setTabChangesFocus(true);
  edit_->setFixedHeight(72);
  button_ = new QPushButton("Send", this);
  button_->setObjectName("sendButton");
  button_->setMinimumWidth(80);
  think_ = new QPushButton("Think", this);
  think_->setObjectName("thinkButton");
  think_->setCheckable(true);
  think_->setMinimumWidth(80);
  think_->hide();
  connect(think_, &QPushButton::toggled, this, [this](bool on) {
    describeThinking(on);
    emit thinkingToggled(on);
  });
  elsewhere_ = new QLabel(this);
  elsewhere_->setObjectName("answeringElsewhere");
  elsewhere_->setTextFormat(Qt::RichText);
  elsewhere_->setWordWrap(true);
  elsewhere_->hide();
  connect(elsewhere_, &QLabel::linkActivated, this, &Composer::elsewhereLinkActivated);
  edit_banner_ = new QLabel(
      "Editing: Enter resends, Esc cancels. The earlier reply stays a page back (<); the "
      "messages after it are removed.",
      this);
  edit_banner_->setObjectName("editBanner");
  edit_banner_->setWordWrap(true);
  edit_banner_->setAutoFillBackground(true);
  QPalette bp = edit_banner_->palette();
  bp.setColor(QPalette::Window, bp.color(QPalette::Highlight).lighter(170));
  edit_banner_->setPalette(bp);
  edit_banner_->hide();
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(12, 4, 12, 8);
  v->setSpacing(4);
  v->addWidget(elsewhere_);
  v->addWidget(edit_banner_);
  auto* h = new QHBoxLayout;
  h->setContentsMargins(0, 0, 0, 0);
  h->addWidget(edit_, 1);
  auto* buttons = new QVBoxLayout;
  buttons->setContentsMargins(0, 0, 0, 0);
  buttons->addWidget(button_);
  buttons->addWidget(think_);
  buttons->addStretch(1);
  h->addLayout(buttons);
  v->addLayout(h);
  connect(edit_, &ComposerEdit::submit, this, &Composer::trySend);
  connect(button_, &QPushButton::clicked, this, [this] {
    if (busy_)
      emit stopRequested();
    else
      trySend();
  });
}

void Composer::setReadOnly(const QString& why) {
  edit_->clear();
  edit_->setReadOnly(true);
  edit_->setPlaceholderText(why);
  button_->setEnabled(false);
}

void Composer::setAnsweringElsewhere(const QString& what) {
  waiting_ = !what.isEmpty();
  elsewhere_->setText(what);
  elsewhere_->setVisible(waiting_);
  if (!edit_->isReadOnly()) button_->setEnabled(!waiting_);
}

void Composer::trySend() {
  if (busy_ || waiting_ || edit_->isReadOnly()) return;
  const QString text = edit_->toPlainText().trimmed();
  if (text.isEmpty()) return;
  edit_->clear();
  emit sendRequested(text);
}

void Composer::setBusy(bool busy) {
  busy_ = busy;
  button_->setText(busy ? "Stop" : editing_ ? "Resend" : "Send");
  button_->setToolTip(busy       ? "Stop the reply (Esc)"
                      : editing_ ? "Send the edited message again (Enter)"
                                 : "Send (Enter)");
}

void Composer::setEditing(bool on) {
  editing_ = on;
  edit_banner_->setVisible(on);
  setBusy(busy_);
}

void Composer::setText(const QString& text) {
  edit_->setPlainText(text);
  edit_->moveCursor(QTextCursor::End);
  edit_->setFocus();
}

QString Composer::text() const { return edit_->toPlainText(); }

void Composer::setThinkingSwitch(bool shown, bool on) {
  {
    const QSignalBlocker quiet(think_);  // the setting is where `on` came from
    think_->setChecked(on);
  }
  describeThinking(on);
  think_->setVisible(shown);
}

void Composer::describeThinking(bool on) {
  think_->setToolTip(
      on ? "The model reasons before it answers (shown apart). Click to have it answer at once."
         : "The model answers at once, without reasoning first. Click to have it reason.");
}

}  // namespace moe
