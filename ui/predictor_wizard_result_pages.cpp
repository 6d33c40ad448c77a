// The last three pages of the predictor wizard: train, evaluation, save.
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include "app/core/model_predictor.h"
#include "ui/predictor_wizard.h"
#include "ui/predictor_wizard_pages.h"
#include "ui/training_chart.h"

namespace moe {
namespace {

QLabel* wrapped(const char* name, QWidget* parent) {
  auto* l = new QLabel(parent);
  l->setObjectName(name);
  l->setWordWrap(true);
  return l;
}

// The evaluation's columns, in the order of EvalScores.
const char* const kPredictors[] = {"learned",        "skip-gate",  "token-based",
                                   "previous-token", "popularity", "random"};

std::vector<double> scores(const EvalScores& s) {
  return {s.learned, s.skip_gate, s.token_based, s.previous_token, s.popularity, s.random};
}

}  // namespace

// ---- train ----

TrainPage::TrainPage(PredictorWizard& wizard) : wizard_(wizard) {
  setTitle("Training");
  setSubTitle(
      "One small network per layer learns to predict the experts of a layer further on. Training stops "
      "when the loss on validation prompts stops improving; the test prompts are kept apart for the "
      "evaluation.");
  chart_ = new TrainingChart(this);
  chart_->setObjectName("trainingChart");
  layer_box_ = new QVBoxLayout;
  status_ = wrapped("trainStatus", this);
  cancel_ = new QPushButton("Cancel", this);
  cancel_->setObjectName("cancelTrain");
  retry_ = new QPushButton("Train again", this);
  retry_->setObjectName("retrainButton");
  retry_->hide();
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(cancel_);
  buttons->addWidget(retry_);
  buttons->addStretch();
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(chart_, 1);
  layout->addLayout(layer_box_);
  layout->addWidget(status_);
  layout->addLayout(buttons);

  connect(cancel_, &QPushButton::clicked, this, [this] {
    if (!run_.running()) return;
    wizard_.trainer().cancel();
    cancel_->setEnabled(false);
    status_->setText("Stopping…");
  });
  connect(retry_, &QPushButton::clicked, this, &TrainPage::start);
  auto& t = wizard_.trainer();
  connect(&t, &PredictorTrainer::trainProgress, this, [this](const TrainProgress& p) {
    if (run_.showsProgress()) onProgress(p);
  });
  connect(&t, &PredictorTrainer::evaluated, this,
          [this](const EvalReport& report, std::shared_ptr<const PredictorSet> set) {
            if (!run_.end()) return;
            cancel_->setEnabled(false);
            wizard_.trained = std::move(set);
            wizard_.report = report;
            status_->setText(QString("Trained %1 layer predictors on %2 tokens and evaluated them on %3 test "
                                     "prompt(s) that training never saw.")
                                 .arg(wizard_.trained->layers.size())
                                 .arg(wizard_.trained->token_count)
                                 .arg(report.test_prompts));
            done_ = true;
            emit completeChanged();
          });
  connect(&t, &PredictorTrainer::failed, this, [this](const QString& reason) {
    if (!run_.end()) return;
    cancel_->setEnabled(false);
    status_->setText("Training stopped: " + reason);
    retry_->show();
  });
}

void TrainPage::initializePage() { start(); }

void TrainPage::start() {
  if (!run_.start()) return;
  done_ = false;
  wizard_.trained.reset();
  chart_->clear();
  chart_->setMaxEpochs(wizard_.trainOptions.max_epochs);
  for (auto& [layer, bar] : layer_bars_) delete bar;
  layer_bars_.clear();
  retry_->hide();
  cancel_->setEnabled(true);
  status_->setText(QString("Training on %1 (distance %2: layer L predicts layer L + %2)…")
                       .arg(wizard_.sourceLabel)
                       .arg(wizard_.trainOptions.distance));
  wizard_.trainer().train(wizard_.tracePath, wizard_.trainOptions);
  emit completeChanged();
}

void TrainPage::onProgress(const TrainProgress& p) {
  const int target = p.layer + wizard_.trainOptions.distance;
  QProgressBar* bar = nullptr;
  for (auto& [layer, b] : layer_bars_)
    if (layer == p.layer) bar = b;
  if (!bar) {
    bar = new QProgressBar(this);
    bar->setObjectName(QString("layerProgress%1").arg(p.layer));
    bar->setRange(0, p.max_epochs);
    bar->setFormat(QString("layer %1 → %2").arg(p.layer).arg(target));
    // keep the bars in layer order
    size_t at = 0;
    while (at < layer_bars_.size() && layer_bars_[at].first < p.layer) ++at;
    layer_bars_.insert(layer_bars_.begin() + long(at), {p.layer, bar});
    layer_box_->insertWidget(int(at), bar);
  }
  if (p.layer_done) {
    bar->setValue(bar->maximum());
    bar->setFormat(QString("layer %1 → %2: done, validation Accuracy %3")
                       .arg(p.layer)
                       .arg(target)
                       .arg(percentText(p.val_accuracy)));
  } else {
    chart_->addPoint(p.layer, target, p.epoch, p.val_loss, p.val_accuracy);
    bar->setValue(p.epoch);
    bar->setFormat(QString("layer %1 → %2: epoch %3, validation Accuracy %4")
                       .arg(p.layer)
                       .arg(target)
                       .arg(p.epoch)
                       .arg(percentText(p.val_accuracy)));
  }
}

void TrainPage::cleanupPage() {
  if (!run_.leave()) return;
  wizard_.trainer().cancel();
}

// ---- evaluation ----

EvaluationPage::EvaluationPage(PredictorWizard& wizard) : wizard_(wizard) {
  setTitle("Evaluation");
  setSubTitle("Accuracy on the test prompts, which training never saw.");
  setCommitPage(true);
  setButtonText(QWizard::CommitButton, "Save");
  table_ = new QTableWidget(0, 8, this);
  table_->setObjectName("evalTable");
  QStringList headers{"Layer", "Test tokens"};
  for (const char* p : kPredictors) headers << p;
  table_->setHorizontalHeaderLabels(headers);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  verdict_ = wrapped("verdictLabel", this);
  auto* legend = wrapped("evalLegend", this);
  legend->setText(
      "Accuracy: the share of the experts the model really used that a predictor named (as many as the model "
      "uses per token). Baselines: skip-gate (the later layer's router applied early: what the proactive "
      "policy "
      "uses without a learned predictor), token-based (the experts most used for this token in training), "
      "previous-token (the previous token's experts: what LRU relies on), popularity (the most used "
      "experts), "
      "random. Red: a baseline at least as good as the learned predictor.");
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(table_, 1);
  layout->addWidget(verdict_);
  layout->addWidget(legend);
}

void EvaluationPage::initializePage() {
  const EvalReport& r = wizard_.report;
  table_->setRowCount(0);
  auto addRow = [this](const QString& name, const EvalLayer& l, bool bold) {
    const int row = table_->rowCount();
    table_->insertRow(row);
    table_->setItem(row, 0, new QTableWidgetItem(name));
    table_->setItem(row, 1, new QTableWidgetItem(QString::number(l.tokens)));
    const auto s = scores(l.acc);
    for (size_t c = 0; c < s.size(); ++c) {
      auto* item = new QTableWidgetItem(percentText(s[c]));
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      QFont f = item->font();
      f.setBold(bold || c == 0);
      item->setFont(f);
      if (c > 0 && s[c] >= 0 && s[c] >= s[0]) {  // a baseline at least as good as the learned predictor
        item->setForeground(QColor(192, 57, 43));
        item->setToolTip("At least as good as the learned predictor here");
      }
      table_->setItem(row, int(2 + c), item);
    }
  };
  for (const auto& l : r.layers) addRow(QString("%1 → %2").arg(l.layer).arg(l.target_layer), l, false);
  addRow("overall", r.overall, true);
  table_->resizeColumnsToContents();

  const auto missed = r.notBeaten();
  QStringList names;
  for (const auto& n : missed) names << QString::fromStdString(n);
  const QString sample = QString("Measured on %1 test prompt(s), %2 tokens per layer on average. ")
                             .arg(r.test_prompts)
                             .arg(r.layers.empty() ? 0 : r.overall.tokens / qint64(r.layers.size()));
  if (missed.empty())
    verdict_->setText(sample +
                      QString("Overall the learned predictor (%1) beats every baseline. Save it to use "
                              "it under the proactive policy.")
                          .arg(percentText(r.overall.acc.learned)));
  else
    verdict_->setText(sample +
                      QString("<b>Overall the learned predictor (%1) does not beat: %2.</b> It can still "
                              "be saved, but under the proactive policy it replaces skip-gate; consider "
                              "more or other prompts, or keeping skip-gate.")
                          .arg(percentText(r.overall.acc.learned), names.join(", ")));
}

// ---- save ----

SavePage::SavePage(PredictorWizard& wizard) : wizard_(wizard) {
  setTitle("Saved");
  result_ = wrapped("saveResult", this);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(result_);
  layout->addStretch();
}

void SavePage::initializePage() {
  const QString error = wizard_.saveTrained();
  if (!error.isEmpty()) {
    setTitle("Not saved");
    result_->setText("The predictor could not be saved: " + error);
    return;
  }
  setTitle("Saved");
  const auto& set = *wizard_.trained;
  // The model menu and the model page show the stored mean validation Accuracy:
  // name that figure, and the test prompts' one beside it, so no two places disagree unexplained.
  const auto stored = storedPredictorInfo(wizard_.db(), set.model_sha256, set.distance);
  const QString menu_figure = stored ? percentText(stored->mean_accuracy) : QString::fromUtf8("—");
  result_->setText(
      QString("The predictor for %1 is stored in the app's database (%2 layers, distance %3, "
              "trained on %4). Mean validation Accuracy %5 (the figure the model menu shows); on the "
              "test prompts %6. It is used under the proactive policy when the model is next opened.")
          .arg(wizard_.model().name)
          .arg(set.layers.size())
          .arg(set.distance)
          .arg(QString::fromStdString(set.trained_on), menu_figure,
               percentText(wizard_.report.overall.acc.learned)));
}

}  // namespace moe
