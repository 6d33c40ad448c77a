#include "ui/perf_strip.h"

#include <QDateTime>
#include <QHBoxLayout>
#include <QPainter>
#include <QSignalBlocker>
#include <QVBoxLayout>
#include <algorithm>

#include "ui/elided_label.h"

namespace moe {
namespace {

constexpr int kFixedTileMaxPx = 120;  // tiles whose widest text is narrower keep that width

const QColor kCached(0x2e, 0x9d, 0x5b);
const QColor kPrefetched(0x3d, 0x8b, 0xd9);
const QColor kInflight(0xe0, 0xa3, 0x2e);
const QColor kMissed(0xd9, 0x4f, 0x3d);

QString bytesText(uint64_t bytes) {
  if (bytes >= 1000000000ull) return QString("%1 GB").arg(QString::number(bytes / 1e9, 'f', 1));
  return QString("%1 MB").arg(QString::number(bytes / 1e6, 'f', 0));
}

QString rate(double v, const char* unit) {
  if (v <= 0) return QString("– %1").arg(unit);
  return QString("%1 %2").arg(v >= 100 ? QString::number(v, 'f', 0) : QString::number(v, 'f', 1), unit);
}

}  // namespace

HitSplitBar::HitSplitBar(QWidget* parent) : QWidget(parent) { setMinimumSize(60, 8); }

void HitSplitBar::setFigures(const PerfFigures& f) {
  f_ = f;
  update();
}

void HitSplitBar::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const QRectF r = QRectF(rect()).adjusted(0, 1, 0, -1);
  p.fillRect(r, palette().color(QPalette::Midlight));
  if (f_.experts_resident && f_.expert_uses == 0) {
    p.fillRect(r, kCached);
    return;
  }
  double x = r.left();
  for (auto [share, color] : {std::pair{f_.cached_share, kCached},
                              {f_.prefetched_share, kPrefetched},
                              {f_.inflight_share, kInflight},
                              {f_.missed_share, kMissed}}) {
    const double w = r.width() * share;
    p.fillRect(QRectF(x, r.top(), w, r.height()), color);
    x += w;
  }
}

PerfStrip::PerfStrip(CounterSource source, QWidget* parent) : QWidget(parent), source_(std::move(source)) {
  setObjectName("perfStrip");
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(8, 4, 8, 4);
  row->setSpacing(10);
  // Each tile's share of the strip is fixed by the widest text it shows (not the
  // text of the moment), so no column moves between idle and a streaming reply.
  decode_ = addTile("Speed", "perfDecode", "9999 tok/s",
                    "How fast the reply is written: generated tokens (word pieces) per second");
  ttft_ = addTile("First token", "perfTtft", "99999 ms",
                  "How long the reply took to start: from sending to its first token");
  prefill_ = addTile("Reading", "perfPrefill", "9999 tok/s",
                     "How fast your message and the chat before it were read: prompt tokens per second");
  vram_ = addTile("GPU memory", "perfVram", "99.9 / 99.9 GB",
                  "Memory in use on the graphics card (by every program) of its total; – when the model "
                  "runs on the CPU");
  ram_ = addTile("RAM", "perfRam", "999.9 GB",
                 "Memory moechat holds in RAM now, the parts of the model file it has read included");
  details_button_ = new QToolButton(this);
  details_button_->setObjectName("perfDetailsButton");
  details_button_->setCheckable(true);
  details_button_->setAutoRaise(true);
  details_button_->setText("Expert cache");
  details_button_->setToolTip(
      "Show or hide how the experts are served: cache hits, the predictor, PCIe copies, waiting");
  static_cast<QHBoxLayout*>(layout())->addWidget(details_button_);
  experts_ = addTile("Expert cache", "perfExperts", "100% hit · 100% prefetched · 100% missed",
                     "Experts the gates chose in the last interval: green cached, blue prefetched by the "
                     "predictor, amber still copying, red missed",
                     true);
  split_ = new HitSplitBar(this);
  static_cast<QVBoxLayout*>(experts_.value->parentWidget()->layout())->insertWidget(2, split_);
  predictor_ =
      addTile("Predictor", "perfPredictor", "GoodPred 100% · accuracy 100%",
              "GoodPred: share of the experts the gates chose that the predictor named AND had copied "
              "in time; accuracy: share it named at all",
              true);
  pcie_ = addTile("PCIe host→GPU", "perfPcie", "25.00 GB/s (100% of link)",
                  "Expert bytes copied to the GPU per second, and the share of "
                  "the link bandwidth measured at start",
                  true);
  blocked_ = addTile("Blocked", "perfBlocked", "100%",
                     "Share of time the compute waited for experts to arrive", true);
  connect(details_button_, &QToolButton::toggled, this, [this](bool on) {
    setDetailsShown(on);
    emit detailsToggled(on);
  });
  setDetailsShown(false);
  experts_.spark->setFixedMaximum(1.0);
  predictor_.spark->setFixedMaximum(1.0);
  blocked_.spark->setFixedMaximum(1.0);
  experts_.spark->setColor(kCached);
  blocked_.spark->setColor(kMissed);
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
  timer_.setInterval(kPollMs);
  connect(&timer_, &QTimer::timeout, this, &PerfStrip::pollNow);
  showFigures(figures_, false);
}

void PerfStrip::setDetailsShown(bool shown) {
  details_shown_ = shown;
  {
    const QSignalBlocker quiet(details_button_);  // detailsToggled is for the user's clicks
    details_button_->setChecked(shown);
  }
  // Open, the tiles beside it carry the words: the button keeps only its arrow (the
  // window's width at 1024 px holds all nine tiles then).
  details_button_->setText(shown ? "◂" : "Expert cache ▸");
  for (QWidget* tile : detail_tiles_) tile->setVisible(shown);
}

PerfStrip::Tile PerfStrip::addTile(const QString& title, const QString& object_name, const QString& widest,
                                   const QString& tip, bool detail) {
  auto* box = new QWidget(this);
  if (detail) detail_tiles_.push_back(box);
  box->setObjectName(object_name + "Tile");
  box->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  box->setToolTip(tip);
  auto* col = new QVBoxLayout(box);
  col->setContentsMargins(0, 0, 0, 0);
  col->setSpacing(1);
  auto* caption = new ElidedLabel(title, box);
  caption->setObjectName(object_name + "Caption");
  QFont small = caption->font();
  small.setPointSizeF(small.pointSizeF() * 0.85);
  caption->setFont(small);
  caption->setForegroundRole(QPalette::PlaceholderText);
  auto* value = new ElidedLabel(box);
  value->setObjectName(object_name);
  QFont bold = value->font();
  bold.setBold(true);
  value->setFont(bold);
  value->setToolTip(tip);
  auto* spark = new Sparkline(kHistory, box);
  col->addWidget(caption);
  col->addWidget(value);
  col->addWidget(spark);
  // Never narrower than its caption and a short figure, so a narrow window elides
  // the long texts (the expert split, the predictor) and keeps the numbers whole.
  box->setMinimumWidth(std::max(QFontMetrics(bold).horizontalAdvance(QStringLiteral("9999 tok/s")),
                                QFontMetrics(small).horizontalAdvance(title)) +
                       4);
  // A figure (a number and its unit) keeps the width of its widest text; the two
  // long texts (the expert split, the predictor) share what is left.
  const int widest_px = QFontMetrics(bold).horizontalAdvance(widest) + 4;
  if (widest_px <= kFixedTileMaxPx) {
    box->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Preferred);
    box->setFixedWidth(std::max(box->minimumWidth(), widest_px));
    static_cast<QHBoxLayout*>(layout())->addWidget(box);
  } else {
    static_cast<QHBoxLayout*>(layout())->addWidget(box, widest_px);
  }
  return {caption, value, spark, title};
}

void PerfStrip::pollNow() {
  const EngineCounters now = source_();
  const qint64 ms = QDateTime::currentMSecsSinceEpoch();
  const double dt = last_ms_ < 0 ? 0.0 : (ms - last_ms_) / 1000.0;
  if (last_ms_ < 0) reply_start_ = now;
  // A reply began since the last poll: its counters start from the previous poll.
  if (now.generating && !last_.generating) {
    reply_start_ = last_ms_ < 0 ? now : last_;
    reply_seconds_ = 0;
  }
  if (now.generating || last_.generating) reply_seconds_ += dt;
  figures_ = derivePerfFigures(last_ms_ < 0 ? now : last_, now, dt);
  const bool idle = !now.generating && !last_.generating;
  // A reply that began and ended between two polls: it spans exactly this interval.
  if (idle && figures_.expert_uses > 0) {
    reply_start_ = last_;
    reply_seconds_ = dt;
  }
  last_ = now;
  last_ms_ = ms;
  showFigures(figures_, false);
  if (idle && figures_.expert_uses == 0) {
    // Nothing moved in this interval: show the last reply as a whole.
    PerfFigures whole = derivePerfFigures(reply_start_, now, reply_seconds_);
    if (whole.expert_uses > 0) {
      showExperts(whole, true);
      figures_ = whole;
    }
  }
}

void PerfStrip::showExperts(const PerfFigures& f, bool whole_reply) {
  split_->setFigures(f);
  const double hit = f.cached_share + f.prefetched_share;
  // Over the whole last reply when idle: the caption says so (the figures keep their room).
  for (const Tile* t : {&experts_, &predictor_})
    t->caption->setText(whole_reply ? t->title + " · last reply" : t->title);
  if (f.expert_uses > 0)
    experts_.value->setText(QString("%1% hit · %2% prefetched · %3% missed")
                                .arg(qRound(100 * hit))
                                .arg(qRound(100 * f.prefetched_share))
                                .arg(qRound(100 * (f.missed_share + f.inflight_share))));
  else
    experts_.value->setText(f.experts_resident ? "all experts resident" : "idle");
  if (f.predicted_truth > 0)
    predictor_.value->setText(QString("GoodPred %1% · accuracy %2%")
                                  .arg(qRound(100 * f.pred_good))
                                  .arg(qRound(100 * f.pred_accuracy)));
  else
    predictor_.value->setText(f.experts_resident ? "not needed" : "–");
}

void PerfStrip::showFigures(const PerfFigures& f, bool whole_reply) {
  showExperts(f, whole_reply);
  const double hit = f.cached_share + f.prefetched_share;
  if (f.expert_uses > 0)
    experts_.spark->push(hit);
  else if (f.generating)
    experts_.spark->push(f.experts_resident ? 1.0 : 0.0);
  if (f.predicted_truth > 0) predictor_.spark->push(f.pred_good);
  const double gbps = f.h2d_bytes_per_second / 1e9;
  pcie_.value->setText(f.link_share > 0 ? QString("%1 GB/s (%2% of link)")
                                              .arg(QString::number(gbps, 'f', 2))
                                              .arg(qRound(100 * f.link_share))
                                        : QString("%1 GB/s").arg(QString::number(gbps, 'f', 2)));
  pcie_.spark->push(gbps);
  prefill_.value->setText(rate(f.prefill_tps, "tok/s"));
  decode_.value->setText(rate(f.decode_tps, "tok/s"));
  if (f.generating) {
    prefill_.spark->push(f.prefill_tps);
    decode_.spark->push(f.decode_tps);
  }
  ttft_.value->setText(f.ttft_seconds < 0
                           ? QString("–")
                           : QString("%1 ms").arg(QString::number(f.ttft_seconds * 1e3, 'f', 0)));
  if (f.generating && f.ttft_seconds >= 0) ttft_.spark->push(f.ttft_seconds * 1e3);
  blocked_.value->setText(QString("%1%").arg(qRound(100 * f.blocked_share)));
  blocked_.spark->push(f.blocked_share);
  const double gb = 1e9;
  vram_.value->setText(f.vram_total_bytes > 0 ? QString("%1 / %2 GB")
                                                    .arg(QString::number(f.vram_used_bytes / gb, 'f', 1))
                                                    .arg(QString::number(f.vram_total_bytes / gb, 'f', 1))
                                              : QString("–"));
  if (f.vram_total_bytes > 0) vram_.spark->push(f.vram_used_bytes / gb);
  ram_.value->setText(f.ram_resident_bytes > 0 ? bytesText(f.ram_resident_bytes) : QString("–"));
  if (f.ram_resident_bytes > 0) ram_.spark->push(f.ram_resident_bytes / gb);
}

}  // namespace moe
