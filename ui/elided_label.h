// Text that never pushes its neighbours: a label that elides what does not fit
// ("…") instead of asking for its whole width, and a status bar whose messages
// stop short of the permanent widgets on the right instead of running into them.
// Whatever is cut off shows whole in the tooltip (hovering the text).
#pragma once

#include <QComboBox>
#include <QLabel>
#include <QStatusBar>

namespace moe {

class ElidedLabel : public QLabel {
  Q_OBJECT

 public:
  explicit ElidedLabel(QWidget* parent = nullptr);
  explicit ElidedLabel(const QString& text, QWidget* parent = nullptr);

  QSize minimumSizeHint() const override;
  // The text as painted now (elided to the label's width).
  QString shownText() const;
  // What hovering shows: the whole text when it is cut off, else the tooltip set.
  QString hoverText() const;

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* e) override;
};

class ElidingStatusBar : public QStatusBar {
  Q_OBJECT

 public:
  explicit ElidingStatusBar(QWidget* parent = nullptr);

  // Where the current message is painted: from the left edge to a gap before the
  // leftmost visible widget (empty without a message).
  QRect messageRect() const;
  QString shownMessage() const;  // the message as painted (elided to messageRect)
  // What hovering the message shows: the whole message when it is cut off.
  QString hoverText() const;

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* e) override;
};

// A combo box whose current entry, when longer than the box, is painted elided ("…")
// instead of cut off at the edge, and shows whole on hover.
class ElidingComboBox : public QComboBox {
  Q_OBJECT

 public:
  explicit ElidingComboBox(QWidget* parent = nullptr);

  // Where the current entry's text is painted, and that text as painted.
  QRect textRect() const;
  QString shownText() const;
  // What hovering shows: the whole entry when it is cut off, else the tooltip set.
  QString hoverText() const;

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* e) override;
};

}  // namespace moe
