#include "ui/composer.h"

#include <QHBoxLayout>
#include <QKeyEvent>
#include <QPushButton>

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
  auto* h = new QHBoxLayout(this);
  h->setContentsMargins(12, 4, 12, 8);
  h->addWidget(edit_, 1);
  h->addWidget(button_);
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

void Composer::trySend() {
  if (busy_ || edit_->isReadOnly()) return;
  const QString text = edit_->toPlainText().trimmed();
  if (text.isEmpty()) return;
  edit_->clear();
  emit sendRequested(text);
}

void Composer::setBusy(bool busy) {
  busy_ = busy;
  button_->setText(busy ? "Stop" : "Send");
  button_->setToolTip(busy ? "Stop the reply (Esc)" : "Send (Enter)");
}

void Composer::setText(const QString& text) {
  edit_->setPlainText(text);
  edit_->moveCursor(QTextCursor::End);
  edit_->setFocus();
}

QString Composer::text() const { return edit_->toPlainText(); }

}  // namespace moe
