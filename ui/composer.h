// The message box: Enter sends, Shift+Enter starts a new line; the button turns
// into Stop while a reply streams.
#pragma once

#include <QPlainTextEdit>
#include <QWidget>

class QPushButton;

namespace moe {

class ComposerEdit : public QPlainTextEdit {
  Q_OBJECT

 public:
  using QPlainTextEdit::QPlainTextEdit;

 signals:
  void submit();

 protected:
  void keyPressEvent(QKeyEvent* e) override;
};

class Composer : public QWidget {
  Q_OBJECT

 public:
  explicit Composer(QWidget* parent = nullptr);
  void setBusy(bool busy);
  bool busy() const { return busy_; }
  // Nothing can be typed or sent from then on; `why` stands in the empty field.
  void setReadOnly(const QString& why);
  void setText(const QString& text);
  QString text() const;
  ComposerEdit* editor() const { return edit_; }
  QPushButton* button() const { return button_; }

 signals:
  void sendRequested(const QString& text);
  void stopRequested();

 private:
  void trySend();
  ComposerEdit* edit_;
  QPushButton* button_;
  bool busy_ = false;
};

}  // namespace moe
