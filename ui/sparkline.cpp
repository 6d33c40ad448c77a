#include "ui/sparkline.h"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>

namespace moe {

Sparkline::Sparkline(int capacity, QWidget* parent)
    : QWidget(parent), ring_(static_cast<size_t>(std::max(2, capacity)), 0.0) {
  setMinimumSize(80, 22);
}

void Sparkline::push(double value) {
  ring_[next_] = value;
  next_ = (next_ + 1) % ring_.size();
  count_ = std::min(count_ + 1, ring_.size());
  update();
}

void Sparkline::clear() {
  next_ = count_ = 0;
  update();
}

std::vector<double> Sparkline::values() const {
  std::vector<double> out;
  out.reserve(count_);
  const size_t first = (next_ + ring_.size() - count_) % ring_.size();
  for (size_t i = 0; i < count_; ++i) out.push_back(ring_[(first + i) % ring_.size()]);
  return out;
}

void Sparkline::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QRectF area = QRectF(rect()).adjusted(1, 2, -1, -2);
  QColor base = palette().color(QPalette::Mid);
  base.setAlpha(60);
  p.setPen(base);
  p.drawLine(area.bottomLeft(), area.bottomRight());
  const auto v = values();
  if (v.size() < 2) return;
  double top = fixed_max_;
  if (top <= 0) top = *std::max_element(v.begin(), v.end());
  if (top <= 0) top = 1;
  // x spans the whole capacity so the line scrolls in from the right.
  const double step = area.width() / static_cast<double>(ring_.size() - 1);
  const double x0 = area.right() - step * static_cast<double>(v.size() - 1);
  QPainterPath line;
  for (size_t i = 0; i < v.size(); ++i) {
    const double y = area.bottom() - area.height() * std::clamp(v[i] / top, 0.0, 1.0);
    const QPointF pt(x0 + step * static_cast<double>(i), y);
    if (i == 0)
      line.moveTo(pt);
    else
      line.lineTo(pt);
  }
  QPainterPath fill = line;
  fill.lineTo(area.right(), area.bottom());
  fill.lineTo(x0, area.bottom());
  fill.closeSubpath();
  QColor under = color_;
  under.setAlpha(50);
  p.fillPath(fill, under);
  p.setPen(QPen(color_, 1.5));
  p.drawPath(line);
}

}  // namespace moe
