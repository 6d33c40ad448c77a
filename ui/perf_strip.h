// The live performance strip. It leads with what every user reads: decode and
// prefill tokens/s, time to first token, GPU memory and RAM in use. One click on
// "Expert cache" shows the machinery beside them: expert hits (cached /
// prefetched / in flight / missed), the predictor's GoodPred, host->device
// throughput and its share of the link, time blocked waiting for experts. Each
// figure has a sparkline over the last minute and a tooltip saying what it is. A
// QTimer polls the engine's counters (never a signal per expert).
#pragma once

#include <QLabel>
#include <QTimer>
#include <QToolButton>
#include <QWidget>
#include <functional>

#include "app/core/perf_figures.h"
#include "ui/sparkline.h"

namespace moe {

// One horizontal bar split into the four shares of expert lookups.
class HitSplitBar : public QWidget {
  Q_OBJECT

 public:
  explicit HitSplitBar(QWidget* parent = nullptr);
  void setFigures(const PerfFigures& f);
  QSize sizeHint() const override { return {120, 10}; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  PerfFigures f_;
};

class PerfStrip : public QWidget {
  Q_OBJECT

 public:
  using CounterSource = std::function<EngineCounters()>;
  static constexpr int kPollMs = 250;
  static constexpr int kHistory = 60000 / kPollMs;  // one minute

  explicit PerfStrip(CounterSource source, QWidget* parent = nullptr);

  void start() { timer_.start(); }
  void stop() { timer_.stop(); }
  // One poll now (the timer calls this); interval_seconds from the last poll.
  void pollNow();
  // Over the last poll interval while a reply runs; over the whole last reply
  // when idle (so the figures stay readable after it ends).
  const PerfFigures& figures() const { return figures_; }
  // Shows or hides the expert-cache figures; a click on the button does the same
  // and emits detailsToggled.
  void setDetailsShown(bool shown);
  bool detailsShown() const { return details_shown_; }
  QToolButton* detailsButton() const { return details_button_; }

 signals:
  void detailsToggled(bool shown);

 private:
  struct Tile {
    QLabel* caption;
    QLabel* value;
    Sparkline* spark;
    QString title;
  };
  // widest: the longest text the tile shows; it sets the tile's share of the strip.
  Tile addTile(const QString& title, const QString& object_name, const QString& widest, const QString& tip,
               bool detail = false);
  void showFigures(const PerfFigures& f, bool whole_reply);
  void showExperts(const PerfFigures& f, bool whole_reply);

  CounterSource source_;
  QTimer timer_;
  EngineCounters last_;
  EngineCounters reply_start_;  // counters when the current/last reply began
  double reply_seconds_ = 0;
  qint64 last_ms_ = -1;
  PerfFigures figures_;
  HitSplitBar* split_ = nullptr;
  Tile experts_{}, predictor_{}, pcie_{}, prefill_{}, decode_{}, ttft_{}, blocked_{}, vram_{}, ram_{};
  QToolButton* details_button_ = nullptr;
  std::vector<QWidget*> detail_tiles_;
  bool details_shown_ = true;
};

}  // namespace moe
