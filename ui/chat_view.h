// The chat pane: one bubble per message, Markdown rendered (code blocks in a
// monospace font), with copy / edit / regenerate actions, and "< 2/3 >" on a
// reply that has alternatives. While a reply streams only its bubble is
// re-rendered, at most every kRenderMs.
#pragma once

#include <QFrame>
#include <QScrollArea>
#include <QString>
#include <QTimer>
#include <vector>

class QLabel;
class QToolButton;
class QVBoxLayout;

namespace moe {

struct MessageItem {
  qint64 id = 0;
  QString role;  // "user", "assistant", "system"
  QString text;
  QString state;                          // "complete", "streaming", "interrupted", "stopped", "error"
  QString footer;                         // stats line under an assistant reply
  int alternative = 1, alternatives = 1;  // this reply's place among its turn's replies
};

class MessageBubble : public QFrame {
  Q_OBJECT

 public:
  MessageBubble(const MessageItem& m, QWidget* parent = nullptr);
  const MessageItem& item() const { return m_; }
  void setText(const QString& text);
  void setFooter(const QString& footer, const QString& state);
  void setRegenerateVisible(bool on);
  void setActionsEnabled(bool on);
  // The message as the user sees it: Markdown rendered, as plain text.
  QString renderedText() const;
  // Framed in the highlight colour: the message a search result led to.
  void setFound(bool found);
  bool found() const { return found_; }

 signals:
  void copyRequested(qint64 id);
  void editRequested(qint64 id);
  void regenerateRequested(qint64 id);
  void alternativeRequested(qint64 id, int step);  // -1 previous, +1 next

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void addPager(QLayout* row);

  MessageItem m_;
  QStringList code_blocks_;  // the fenced code blocks of m_.text, for their "Copy code" links
  QLabel* body_ = nullptr;
  QLabel* footer_;
  QToolButton* copy_;
  QToolButton* edit_ = nullptr;
  QToolButton* regenerate_ = nullptr;
  QToolButton* previous_ = nullptr;
  QToolButton* next_ = nullptr;
  bool found_ = false;
};

class ChatView : public QScrollArea {
  Q_OBJECT

 public:
  static constexpr int kRenderMs = 50;  // at most 20 re-renders a second
  explicit ChatView(QWidget* parent = nullptr);

  void setMessages(const std::vector<MessageItem>& messages);
  void appendMessage(const MessageItem& m);
  // Puts m in the place of message `id` (another alternative of a reply shown).
  void replaceMessage(qint64 id, const MessageItem& m);
  // The streaming reply's whole text so far; rendered on the next tick.
  void setStreamingText(qint64 id, const QString& text);
  void finishMessage(qint64 id, const QString& text, const QString& footer, const QString& state);
  void setBusy(bool busy);
  void setPlaceholder(const QString& html);

  int bubbleCount() const { return static_cast<int>(bubbles_.size()); }
  MessageBubble* bubble(int i) const { return bubbles_.at(static_cast<size_t>(i)); }
  MessageBubble* bubbleFor(qint64 id) const;
  // Scrolls message `id` into view and frames it (the chat stops following its
  // end until the user scrolls back there); false when it is not shown.
  bool showFound(qint64 id);
  void clearFound();  // the framed message (if any) back to normal
  qint64 foundMessage() const { return found_id_; }
  int renderCount() const { return renders_; }
  // Whether the view keeps the latest text in view as it grows: true until the
  // user scrolls up, again once they scroll back to the end or send a message.
  bool followsEnd() const { return following_; }

 signals:
  void copyRequested(qint64 id);
  void editRequested(qint64 id);
  void regenerateRequested(qint64 id);
  void alternativeRequested(qint64 id, int step);

 private:
  MessageBubble* makeBubble(const MessageItem& m);
  void renderPending();
  void updateRegenerate();
  void scrollToEnd();
  bool atEnd() const;

  QWidget* content_;
  QVBoxLayout* column_;
  QLabel* placeholder_;
  std::vector<MessageBubble*> bubbles_;
  QTimer render_timer_;
  qint64 pending_id_ = 0;
  QString pending_text_;
  bool has_pending_ = false;
  bool busy_ = false;
  int renders_ = 0;
  bool following_ = true;   // keep the end in view as the content grows
  bool scrolling_ = false;  // the view, not the user, is moving the scroll bar
  qint64 found_id_ = 0;
};

}  // namespace moe
