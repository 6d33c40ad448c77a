// Which experts sit in the GPU cache right now: one row per layer, one cell
// per expert (ready, loading, absent), refreshed by a timer from the engine's
// residency snapshot.
#pragma once

#include <QTimer>
#include <QWidget>
#include <functional>

#include "app/core/chat_engine.h"

namespace moe {

class ExpertHeatMap : public QWidget {
  Q_OBJECT

 public:
  using ResidencySource = std::function<ExpertResidency()>;
  explicit ExpertHeatMap(ResidencySource source, QWidget* parent = nullptr);

  void start() { timer_.start(); }
  void stop() { timer_.stop(); }
  void refresh();
  const ExpertResidency& residency() const { return r_; }
  int readyCount() const;

  QSize sizeHint() const override { return {320, 220}; }

 protected:
  void paintEvent(QPaintEvent*) override;
  bool event(QEvent* e) override;  // tooltips: layer and expert under the cursor

 private:
  QRectF cellRect(int layer, int expert) const;
  ResidencySource source_;
  QTimer timer_;
  ExpertResidency r_;
};

}  // namespace moe
