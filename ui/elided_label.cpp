#include "ui/elided_label.h"

#include <QHelpEvent>
#include <QPainter>
#include <QStyle>
#include <QStyleOptionComboBox>
#include <QStylePainter>
#include <QToolTip>

namespace moe {

ElidedLabel::ElidedLabel(QWidget* parent) : QLabel(parent) {}
ElidedLabel::ElidedLabel(const QString& text, QWidget* parent) : QLabel(text, parent) {}

QSize ElidedLabel::minimumSizeHint() const {
  return {fontMetrics().horizontalAdvance(QStringLiteral("Mmmm…")), QLabel::minimumSizeHint().height()};
}

QString ElidedLabel::shownText() const {
  return fontMetrics().elidedText(text(), Qt::ElideRight, contentsRect().width());
}

namespace {

// A tooltip event answered with `tip` (the whole text when it is elided), or none.
bool showHoverTip(QEvent* e, QWidget* w, const QString& tip) {
  if (tip.isEmpty())
    QToolTip::hideText();
  else
    QToolTip::showText(static_cast<QHelpEvent*>(e)->globalPos(), tip, w);
  return true;
}

}  // namespace

QString ElidedLabel::hoverText() const { return shownText() != text() ? text() : toolTip(); }

bool ElidedLabel::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) return showHoverTip(e, this, hoverText());
  return QLabel::event(e);
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

QString ElidingStatusBar::hoverText() const {
  return shownMessage() != currentMessage() ? currentMessage() : QString();
}

bool ElidingStatusBar::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    if (messageRect().contains(help->pos()) && !hoverText().isEmpty()) {
      QToolTip::showText(help->globalPos(), hoverText(), this);
      return true;
    }
  }
  return QStatusBar::event(e);
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

ElidingComboBox::ElidingComboBox(QWidget* parent) : QComboBox(parent) {}

QRect ElidingComboBox::textRect() const {
  QStyleOptionComboBox opt;
  initStyleOption(&opt);
  // As the style paints the label: the edit field less a pixel each side.
  return style()
      ->subControlRect(QStyle::CC_ComboBox, &opt, QStyle::SC_ComboBoxEditField, this)
      .adjusted(1, 0, -1, 0);
}

QString ElidingComboBox::shownText() const {
  return fontMetrics().elidedText(currentText(), Qt::ElideRight, textRect().width());
}

QString ElidingComboBox::hoverText() const {
  return shownText() != currentText() ? currentText() : toolTip();
}

bool ElidingComboBox::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) return showHoverTip(e, this, hoverText());
  return QComboBox::event(e);
}

void ElidingComboBox::paintEvent(QPaintEvent*) {
  QStylePainter painter(this);
  painter.setPen(palette().color(QPalette::Text));
  QStyleOptionComboBox opt;
  initStyleOption(&opt);
  painter.drawComplexControl(QStyle::CC_ComboBox, opt);
  opt.currentText = shownText();
  painter.drawControl(QStyle::CE_ComboBoxLabel, opt);
}

}  // namespace moe
