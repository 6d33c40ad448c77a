#include "ui/elided_label.h"

#include <QPainter>
#include <QStyle>

namespace moe {

ElidedLabel::ElidedLabel(QWidget* parent) : QLabel(parent) {}
ElidedLabel::ElidedLabel(const QString& text, QWidget* parent) : QLabel(text, parent) {}

QSize ElidedLabel::minimumSizeHint() const {
  return {fontMetrics().horizontalAdvance(QStringLiteral("Mmmm…")), QLabel::minimumSizeHint().height()};
}

QString ElidedLabel::shownText() const {
  return fontMetrics().elidedText(text(), Qt::ElideRight, contentsRect().width());
}

void ElidedLabel::paintEvent(QPaintEvent*) {
  QPainter p(this);
  style()->drawItemText(&p, contentsRect(), int(alignment()) | Qt::TextSingleLine, palette(), isEnabled(),
                        shownText(), foregroundRole());
}

ElidingStatusBar::ElidingStatusBar(QWidget* parent) : QStatusBar(parent) {
  connect(this, &QStatusBar::messageChanged, this, qOverload<>(&QWidget::update));
}

QRect ElidingStatusBar::messageRect() const {
  if (currentMessage().isEmpty()) return {};
  constexpr int kMargin = 6, kGap = 12;
  int right = width() - kMargin;
  for (QObject* o : children()) {
    auto* w = qobject_cast<QWidget*>(o);
    if (w && w->isVisible() && !w->isWindow() && w->x() > kMargin) right = std::min(right, w->x() - kGap);
  }
  return {kMargin, 0, std::max(0, right - kMargin), height()};
}

QString ElidingStatusBar::shownMessage() const {
  return fontMetrics().elidedText(currentMessage(), Qt::ElideRight, messageRect().width());
}

void ElidingStatusBar::paintEvent(QPaintEvent* event) {
  if (currentMessage().isEmpty()) {
    QStatusBar::paintEvent(event);
    return;
  }
  QPainter p(this);
  p.setPen(palette().color(QPalette::WindowText));
  p.drawText(messageRect(), Qt::AlignLeading | Qt::AlignVCenter | Qt::TextSingleLine, shownMessage());
}

}  // namespace moe
