// Training curves without Qt Charts: per epoch, the validation loss (top panel)
// and the validation Accuracy (bottom panel), one coloured curve per layer,
// with a legend. Points arrive as training reports them.
#pragma once

#include <QWidget>
#include <map>
#include <vector>

namespace moe {

class TrainingChart : public QWidget {
  Q_OBJECT

 public:
  explicit TrainingChart(QWidget* parent = nullptr);

  // Epoch `epoch` (1-based) of `layer` (predicting `target_layer`).
  void addPoint(int layer, int target_layer, int epoch, double val_loss, double val_accuracy);
  void setMaxEpochs(int epochs);
  void clear();

  struct Point {
    int epoch = 0;
    double loss = 0, accuracy = 0;
  };
  struct Curve {
    int target_layer = 0;
    std::vector<Point> points;
  };
  const std::map<int, Curve>& curves() const { return curves_; }  // by layer
  QSize sizeHint() const override { return {480, 260}; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  void drawPanel(class QPainter& p, const QRectF& area, const QString& title, bool accuracy);

  std::map<int, Curve> curves_;
  int max_epochs_ = 1;
};

// The colour of the i-th curve (distinct, readable on light and dark).
QColor curveColor(int i);

}  // namespace moe
