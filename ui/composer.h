// The message box: Enter sends, Shift+Enter starts a new line; the button turns
// into Stop while this chat's reply streams. While another chat's reply streams,
// a line above the box says which (with a link to it) and nothing is sent: what is
// typed stays.
#pragma once

#include <QPlainTextEdit>
#include <QWidget>

class QLabel;
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
  // Non-empty (rich text, may hold a link): another chat is answering, said above
  // the box; Send waits. Empty: sending is open again.
  void setAnsweringElsewhere(const QString& what);
  QLabel* elsewhereLabel() const { return elsewhere_; }
  // Editing an earlier message: a banner says so and the button reads Resend.
  void setEditing(bool on);
  bool editing() const { return editing_; }
  QLabel* editBanner() const { return edit_banner_; }
  void setText(const QString& text);
  QString text() const;
  ComposerEdit* editor() const { return edit_; }
  QPushButton* button() const { return button_; }
  // The Think switch, shown for a model whose template can turn its reasoning off
  // (Qwen3.5/3.6, MiniMax-M2): on, it reasons before it answers; off, it answers at once.
  void setThinkingSwitch(bool shown, bool on);
  QPushButton* thinkButton() const { return think_; }

 signals:
  void sendRequested(const QString& text);
  void stopRequested();
  void elsewhereLinkActivated(const QString& link);
  void thinkingToggled(bool on);

 private:
  void trySend();
  void describeThinking(bool on);
  ComposerEdit* edit_;
  QPushButton* button_;
  QPushButton* think_;
  QLabel* elsewhere_;
  QLabel* edit_banner_;
  bool busy_ = false;
  bool editing_ = false;
  bool waiting_ = false;  // another chat is answering
};

}  // namespace moe
