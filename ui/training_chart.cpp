#include "ui/training_chart.h"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>

namespace moe {

QColor curveColor(int i) {
  static const QColor colors[] = {QColor(31, 119, 180),  QColor(255, 127, 14),  QColor(44, 160, 44),
                                  QColor(214, 39, 40),   QColor(148, 103, 189), QColor(140, 86, 75),
                                  QColor(227, 119, 194), QColor(127, 127, 127), QColor(188, 189, 34),
                                  QColor(23, 190, 207)};
  const int n = int(std::size(colors));
  QColor c = colors[i % n];
  return i < n ? c : c.darker(100 + 30 * (i / n));
}

TrainingChart::TrainingChart(QWidget* parent) : QWidget(parent) {
  setMinimumSize(320, 200);
  setAccessibleName("Training chart");
}

void TrainingChart::addPoint(int layer, int target_layer, int epoch, double val_loss, double val_accuracy) {
  Curve& c = curves_[layer];
  c.target_layer = target_layer;
  c.points.push_back({epoch, val_loss, val_accuracy});
  max_epochs_ = std::max(max_epochs_, epoch);
  update();
}

void TrainingChart::setMaxEpochs(int epochs) {
  max_epochs_ = std::max(1, epochs);
  update();
}

void TrainingChart::clear() {
  curves_.clear();
  update();
}

namespace {
constexpr double kAxisLabelWidth = 52;  // "0.0727" in the default font, with room to spare
}  // namespace

void TrainingChart::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const int legend_w = 90;
  const QRectF plot = QRectF(rect()).adjusted(kAxisLabelWidth + 6, 8, -legend_w, -22);
  const double gap = 26;
  const double h = (plot.height() - gap) / 2;
  drawPanel(p, QRectF(plot.left(), plot.top(), plot.width(), h), "validation loss", false);
  drawPanel(p, QRectF(plot.left(), plot.top() + h + gap, plot.width(), h), "validation Accuracy", true);
  // x axis label under the lower panel
  p.setPen(palette().color(QPalette::WindowText));
  p.drawText(QRectF(plot.left(), plot.bottom() + 4, plot.width(), 16), Qt::AlignCenter,
             QString("epoch (1 to %1)").arg(max_epochs_));
  // legend
  int i = 0;
  for (const auto& [layer, c] : curves_) {
    const QRectF row(plot.right() + 10, plot.top() + 18 * i, legend_w - 12, 16);
    p.fillRect(QRectF(row.left(), row.center().y() - 2, 12, 4), curveColor(i));
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(row.adjusted(16, 0, 0, 0), Qt::AlignVCenter | Qt::AlignLeft,
               QString("%1 → %2").arg(layer).arg(c.target_layer));
    ++i;
  }
}

void TrainingChart::drawPanel(QPainter& p, const QRectF& area, const QString& title, bool accuracy) {
  QColor grid = palette().color(QPalette::Mid);
  grid.setAlpha(90);
  p.setPen(grid);
  p.drawRect(area);
  double lo = 0, hi = 1;
  if (!accuracy) {
    hi = 0;
    lo = 1e300;
    for (const auto& [layer, c] : curves_)
      for (const auto& pt : c.points) hi = std::max(hi, pt.loss), lo = std::min(lo, pt.loss);
    if (hi <= 0) hi = 1;
    lo = std::min(lo, hi);
    if (hi - lo < 1e-9) lo = 0;
  }
  p.setPen(palette().color(QPalette::WindowText));
  const auto label = [&](double v) {
    return accuracy ? QString("%1%").arg(v * 100, 0, 'f', 0) : QString::number(v, 'g', 3);
  };
  const double w = kAxisLabelWidth;
  p.drawText(QRectF(area.left() - w - 4, area.top() - 6, w, 14), Qt::AlignRight, label(hi));
  p.drawText(QRectF(area.left() - w - 4, area.bottom() - 8, w, 14), Qt::AlignRight, label(lo));
  p.drawText(area.adjusted(6, 2, 0, 0), Qt::AlignTop | Qt::AlignLeft, title);
  const double span_x = std::max(1, max_epochs_ - 1);
  int i = 0;
  for (const auto& [layer, c] : curves_) {
    QPainterPath path;
    for (size_t j = 0; j < c.points.size(); ++j) {
      const double v = accuracy ? c.points[j].accuracy : c.points[j].loss;
      const double x = area.left() + area.width() * (c.points[j].epoch - 1) / span_x;
      const double y = area.bottom() - area.height() * std::clamp((v - lo) / (hi - lo), 0.0, 1.0);
      if (j == 0)
        path.moveTo(x, y);
      else
        path.lineTo(x, y);
    }
    p.setPen(QPen(curveColor(i), 1.8));
    p.drawPath(path);
    if (c.points.size() == 1) p.drawEllipse(path.currentPosition(), 2, 2);
    ++i;
  }
}

}  // namespace moe
