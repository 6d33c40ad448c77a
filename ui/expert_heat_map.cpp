#include "ui/expert_heat_map.h"

#include <QHelpEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>

namespace moe {

ExpertHeatMap::ExpertHeatMap(ResidencySource source, QWidget* parent)
    : QWidget(parent), source_(std::move(source)) {
  setObjectName("expertHeatMap");
  setMinimumSize(160, 100);
  timer_.setInterval(500);
  connect(&timer_, &QTimer::timeout, this, &ExpertHeatMap::refresh);
}

void ExpertHeatMap::refresh() {
  r_ = source_();
  update();
}

int ExpertHeatMap::readyCount() const {
  return static_cast<int>(std::count(r_.state.begin(), r_.state.end(), ExpertPlace::kReady));
}

QRectF ExpertHeatMap::cellRect(int layer, int expert) const {
  const double w = static_cast<double>(width() - 2) / std::max(1, r_.n_expert);
  const double h = static_cast<double>(height() - 2) / std::max(1, r_.n_layer);
  return {1 + expert * w, 1 + layer * h, std::max(1.0, w - (w > 4 ? 1 : 0)),
          std::max(1.0, h - (h > 4 ? 1 : 0))};
}

void ExpertHeatMap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().color(QPalette::Base));
  if (r_.n_layer == 0 || r_.n_expert == 0) {
    p.setPen(palette().color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter, "no model loaded");
    return;
  }
  const QColor colors[3] = {palette().color(QPalette::Midlight), QColor(0xe0, 0xa3, 0x2e),
                            QColor(0x2e, 0x9d, 0x5b)};
  for (int l = 0; l < r_.n_layer; ++l)
    for (int e = 0; e < r_.n_expert; ++e) {
      const auto s = r_.state[static_cast<size_t>(l) * r_.n_expert + e];
      p.fillRect(cellRect(l, e), colors[static_cast<int>(s)]);
    }
}

bool ExpertHeatMap::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip && r_.n_layer > 0 && r_.n_expert > 0) {
    auto* help = static_cast<QHelpEvent*>(e);
    const int expert = std::clamp(
        static_cast<int>((help->pos().x() - 1) * r_.n_expert / std::max(1, width() - 2)), 0, r_.n_expert - 1);
    const int layer = std::clamp(
        static_cast<int>((help->pos().y() - 1) * r_.n_layer / std::max(1, height() - 2)), 0, r_.n_layer - 1);
    static const char* names[3] = {"not cached", "loading", "ready"};
    const auto s = r_.state[static_cast<size_t>(layer) * r_.n_expert + expert];
    QToolTip::showText(
        help->globalPos(),
        QString("layer %1, expert %2: %3").arg(layer).arg(expert).arg(names[static_cast<int>(s)]), this);
    return true;
  }
  return QWidget::event(e);
}

}  // namespace moe
