// Text that never pushes its neighbours: a label that elides what does not fit
// ("…") instead of asking for its whole width, and a status bar whose messages
// stop short of the permanent widgets on the right instead of running into them.
#pragma once

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

 protected:
  void paintEvent(QPaintEvent* event) override;
};

class ElidingStatusBar : public QStatusBar {
  Q_OBJECT

 public:
  explicit ElidingStatusBar(QWidget* parent = nullptr);

  // Where the current message is painted: from the left edge to a gap before the
  // leftmost visible widget (empty without a message).
  QRect messageRect() const;
  QString shownMessage() const;  // the message as painted (elided to messageRect)

 protected:
  void paintEvent(QPaintEvent* event) override;
};

}  // namespace moe
