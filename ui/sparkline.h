// A small line chart of the last N values (a ring buffer), painted with
// QPainter; the performance strip keeps one per figure over the last minute.
#pragma once

#include <QColor>
#include <QWidget>
#include <vector>

namespace moe {

class Sparkline : public QWidget {
  Q_OBJECT

 public:
  explicit Sparkline(int capacity, QWidget* parent = nullptr);

  void push(double value);
  void clear();
  // Values at or below zero up to this are drawn against a fixed scale (e.g. 1.0
  // for shares); 0 scales to the largest value shown.
  void setFixedMaximum(double max) { fixed_max_ = max; }
  void setColor(const QColor& c) { color_ = c; }
  std::vector<double> values() const;  // oldest first

  QSize sizeHint() const override { return {120, 26}; }
  QSize minimumSizeHint() const override { return {80, 22}; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  std::vector<double> ring_;
  size_t next_ = 0;
  size_t count_ = 0;
  double fixed_max_ = 0;
  QColor color_{0x3d, 0x8b, 0xd9};
};

}  // namespace moe
