// The first three pages of the predictor wizard: model, prompt source, trace.
#include "ui/predictor_wizard_pages.h"

#include <QButtonGroup>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include "app/core/conversation_prompts.h"
#include "ui/predictor_wizard.h"
#include "ui/theme.h"

namespace moe {
namespace {

QLabel* wrapped(const QString& text, const char* name, QWidget* parent) {
  auto* l = new QLabel(text, parent);
  l->setObjectName(name);
  l->setWordWrap(true);
  return l;
}

QString secondsText(double s) { return QString::fromStdString(durationText(s)); }

}  // namespace

// ---- model ----

PredictorModelPage::PredictorModelPage(PredictorWizard& wizard) : wizard_(wizard) {
  setTitle("Choose a model");
  setSubTitle(
      "A predictor learns, from one layer's input, which experts a later layer will use, so the proactive "
      "policy can copy them early. It is trained for one model file.");
  table_ = new QTableWidget(0, 3, this);
  table_->setObjectName("modelTable");
  table_->setHorizontalHeaderLabels({"Model", "Predictor", "Accuracy"});
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->hide();
  table_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  table_->setToolTip(
      "Accuracy: the stored predictor's mean validation Accuracy (share of the experts really "
      "used that it predicted)");
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(table_);
  layout->addWidget(
      wrapped("Accuracy: the stored predictor's mean validation Accuracy, the share of the experts "
              "really used that it named. Training a model again replaces its stored predictor once "
              "you save.",
              "modelNote", this));
  connect(table_, &QTableWidget::itemSelectionChanged, this, &QWizardPage::completeChanged);
}

void PredictorModelPage::initializePage() {
  const QString chosen = wizard_.model().path;
  table_->setRowCount(0);
  for (const auto& m : wizard_.models()) {
    const int row = table_->rowCount();
    table_->insertRow(row);
    auto* name = new QTableWidgetItem(m.name);
    name->setData(Qt::UserRole, m.path);
    name->setData(Qt::UserRole + 1, m.sha256);
    name->setToolTip(m.path.isEmpty() ? "The demo model built into the app" : m.path);
    table_->setItem(row, 0, name);
    table_->setItem(row, 1, new QTableWidgetItem(m.predictor.isEmpty() ? "none" : m.predictor));
    table_->setItem(row, 2, new QTableWidgetItem(percentText(m.accuracy)));
    if (m.path == chosen) table_->selectRow(row);
  }
  table_->resizeColumnToContents(1);
  table_->resizeColumnToContents(2);
}

bool PredictorModelPage::isComplete() const { return !table_->selectedItems().isEmpty(); }

bool PredictorModelPage::validatePage() {
  const auto rows = table_->selectionModel()->selectedRows();
  if (rows.isEmpty()) return false;
  const auto* item = table_->item(rows.front().row(), 0);
  TrainableModel m;
  m.name = item->text();
  m.path = item->data(Qt::UserRole).toString();
  m.sha256 = item->data(Qt::UserRole + 1).toString();
  wizard_.chooseModel(m);
  return true;
}

// ---- prompt source ----

PromptSourcePage::PromptSourcePage(PredictorWizard& wizard) : wizard_(wizard) {
  setTitle("Choose the prompts");
  setSubTitle(
      "The model runs over these prompts while their routing is recorded (a trace); the predictor learns "
      "from the trace. Prompts like the ones you will chat with give the best predictor.");
  builtin_ = new QRadioButton("Built-in prompts (chat, code, maths, translation, eight languages)", this);
  builtin_->setObjectName("builtinRadio");
  file_ = new QRadioButton("Prompts from a text file (one per line)", this);
  file_->setObjectName("fileRadio");
  conversations_ = new QRadioButton("Your conversations (your own messages, newest first)", this);
  conversations_->setObjectName("conversationsRadio");
  recorded_ = new QRadioButton("Traces recorded while you chatted (no tracing needed)", this);
  recorded_->setObjectName("recordedRadio");
  auto* group = new QButtonGroup(this);
  for (auto* r : {builtin_, file_, conversations_, recorded_}) group->addButton(r);
  builtin_->setChecked(true);
  file_edit_ = new QLineEdit(this);
  file_edit_->setObjectName("promptFileEdit");
  file_edit_->setPlaceholderText("prompts.txt");
  browse_ = new QPushButton("Browse…", this);
  count_ = new QSpinBox(this);
  count_->setObjectName("promptCount");
  count_->setRange(3, 3);
  tokens_ = new QSpinBox(this);
  tokens_->setObjectName("newTokens");
  tokens_->setRange(0, 256);
  tokens_->setToolTip("Greedy tokens generated after each prompt, so replies are traced too");
  available_ = wrapped({}, "availableLabel", this);
  estimate_ = wrapped({}, "estimateLabel", this);
  error_ = wrapped({}, "errorLabel", this);
  QPalette error_palette = error_->palette();
  error_palette.setColor(QPalette::WindowText, errorColor(error_palette));
  error_->setPalette(error_palette);

  auto* file_row = new QHBoxLayout;
  file_row->addSpacing(24);
  file_row->addWidget(file_edit_);
  file_row->addWidget(browse_);
  auto* form = new QFormLayout;
  form->addRow("Prompts to trace:", count_);
  form->addRow("Tokens generated per prompt:", tokens_);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(builtin_);
  layout->addWidget(file_);
  layout->addLayout(file_row);
  layout->addWidget(conversations_);
  layout->addWidget(recorded_);
  layout->addLayout(form);
  layout->addWidget(available_);
  layout->addWidget(estimate_);
  layout->addWidget(error_);
  layout->addStretch();

  connect(group, &QButtonGroup::buttonToggled, this, [this](QAbstractButton*, bool on) {
    if (on) updateChoice();
  });
  connect(file_edit_, &QLineEdit::textEdited, this, [this] {
    if (!file_->isChecked()) file_->setChecked(true);  // typing there chooses the file
    updateChoice();
  });
  connect(browse_, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, "Prompt file", {}, "Text (*.txt);;All files (*)");
    if (path.isEmpty()) return;
    file_edit_->setText(path);
    file_->setChecked(true);
    updateChoice();
  });
  connect(count_, &QSpinBox::valueChanged, this, &PromptSourcePage::updateEstimate);
  connect(tokens_, &QSpinBox::valueChanged, this, &PromptSourcePage::updateEstimate);
  connect(&wizard_, &PredictorWizard::modelReadyChanged, this, [this] {
    updateChoice();  // the recorded traces are found by the model's hash, known once it is open
  });
  connect(&wizard_, &PredictorWizard::modelFailed, this, [this](const QString& reason) {
    estimate_->setText({});
    error_->setText("The model could not be opened: " + reason);
  });
}

void PromptSourcePage::initializePage() {
  tokens_->setValue(wizard_.traceOptions.max_new_tokens);
  const int mine = conversationPromptCount(wizard_.db());
  conversations_->setEnabled(mine >= 3);
  conversations_->setToolTip(mine >= 3
                                 ? QString("%1 distinct messages of yours").arg(mine)
                                 : QString("Your conversations hold %1 message(s) of yours; training needs "
                                           "at least 3 prompts")
                                       .arg(mine));
  if (wizard_.source == PredictorWizard::Source::Recorded) recorded_->setChecked(true);  // the retrain offer
  cached_key_.clear();
  error_->clear();
  updateChoice();
}

std::vector<std::string> PromptSourcePage::availablePrompts(QString* error) {
  try {
    if (builtin_->isChecked()) return builtinPrompts();
    if (conversations_->isChecked()) return conversationPrompts(wizard_.db(), 1 << 30);
    if (file_->isChecked()) {
      if (file_edit_->text().trimmed().isEmpty()) {
        *error = "Choose a text file with one prompt per line.";
        return {};
      }
      return promptsFromFile(file_edit_->text().trimmed().toStdString());
    }
  } catch (const std::exception& e) {
    *error = QString::fromUtf8(e.what());
  }
  return {};
}

void PromptSourcePage::updateChoice() {
  const QString recorded = wizard_.recordedTraceFor(wizard_.model().sha256);
  recorded_->setEnabled(!recorded.isEmpty());
  recorded_->setToolTip(!recorded.isEmpty() ? recorded
                        : !wizard_.modelReady()
                            ? QString("Known once the model is open")
                            : QString("No traces were recorded for this model while chatting (learning from "
                                      "use is off, or you have not chatted with it yet)"));
  if (recorded_->isChecked() && recorded.isEmpty()) builtin_->setChecked(true);  // calls back here
  const QString key = QString("%1|%2|%3")
                          .arg(builtin_->isChecked()         ? "b"
                               : conversations_->isChecked() ? "c"
                               : file_->isChecked()          ? "f"
                                                             : "r",
                               file_edit_->text(), wizard_.model().sha256);
  if (key != cached_key_) {
    QString error;
    cached_ = recorded_->isChecked() ? std::vector<std::string>{} : availablePrompts(&error);
    cached_key_ = key;
    error_->setText(error);
    const int n = int(cached_.size());
    count_->setRange(3, std::max(3, n));
    count_->setValue(builtin_->isChecked() ? std::min(n, 40) : n);
    available_->setText(recorded_->isChecked() ? QString()
                        : n >= 3               ? QString("%1 prompts available.").arg(n)
                        : error.isEmpty()
                            ? QString("Only %1 prompt(s) here; training needs at least 3.").arg(n)
                            : QString());
  }
  const bool tracing = !recorded_->isChecked();
  count_->setEnabled(tracing);
  tokens_->setEnabled(tracing);
  file_edit_->setEnabled(!recorded_->isChecked());
  updateEstimate();
  emit completeChanged();
}

void PromptSourcePage::updateEstimate() {
  if (!wizard_.modelReady()) {
    if (error_->text().isEmpty())
      estimate_->setText("Opening the model and measuring how fast it traces here…");
    return;
  }
  if (recorded_->isChecked()) {
    estimate_->setText("Nothing to trace: training uses the traces recorded while you chatted.");
    emit completeChanged();
    return;
  }
  TraceOptions o = wizard_.traceOptions;
  o.max_new_tokens = tokens_->value();
  const TraceRates& r = wizard_.rates();
  const double s = estimateTraceSeconds(r, cached_, count_->value(), o);
  estimate_->setText(QString("Estimated tracing time: %1. This is an estimate from tracing %2 tokens on this "
                             "machine just now (%3 ms per prompt token, %4 ms per generated token); training "
                             "comes after and stops when the validation loss stops improving.")
                         .arg(secondsText(s))
                         .arg(r.measured_tokens)
                         .arg(r.prefill_seconds_per_token * 1e3, 0, 'f', 2)
                         .arg(r.decode_seconds_per_token * 1e3, 0, 'f', 2));
  emit completeChanged();
}

bool PromptSourcePage::isComplete() const {
  if (!wizard_.modelReady()) return false;
  if (recorded_->isChecked()) return recorded_->isEnabled();
  return cached_.size() >= 3 && count_->value() >= 3 && count_->value() <= int(cached_.size());
}

bool PromptSourcePage::validatePage() {
  if (!isComplete()) return false;
  auto& w = wizard_;
  w.traceOptions.max_new_tokens = tokens_->value();
  if (recorded_->isChecked()) {
    w.source = PredictorWizard::Source::Recorded;
    w.prompts.clear();
    w.tracePath = w.recordedTraceFor(w.model().sha256);
    w.sourceLabel = "traces recorded while chatting";
  } else {
    const int n = count_->value();
    w.source = builtin_->isChecked()         ? PredictorWizard::Source::Builtin
               : conversations_->isChecked() ? PredictorWizard::Source::Conversations
                                             : PredictorWizard::Source::File;
    w.prompts.assign(cached_.begin(), cached_.begin() + n);
    w.sourceLabel = (builtin_->isChecked()         ? QString("built-in prompts (%1)")
                     : conversations_->isChecked() ? QString("your conversations (%1 prompts)")
                                                   : QString("%2 (%1 prompts)").arg("%1", file_edit_->text()))
                        .arg(n);
    w.tracePath = QString::fromStdString(
        traceFileFor(w.tracesDir().toStdString(), w.model().sha256.toStdString(), w.prompts, w.traceOptions));
  }
  w.trainOptions.trained_on = w.sourceLabel.toStdString();
  return true;
}

// ---- trace ----

TracePage::TracePage(PredictorWizard& wizard) : wizard_(wizard) {
  setTitle("Tracing");
  setSubTitle(
      "The model runs over the prompts; per token and layer, its input and the experts it chose are "
      "written to a trace file. Cancelled work is kept: resume continues where it stopped.");
  progress_ = new QProgressBar(this);
  progress_->setObjectName("traceProgress");
  status_ = wrapped({}, "traceStatus", this);
  eta_ = wrapped({}, "etaLabel", this);
  cancel_ = new QPushButton("Cancel", this);
  cancel_->setObjectName("cancelTrace");
  resume_ = new QPushButton("Resume", this);
  resume_->setObjectName("resumeTrace");
  resume_->hide();
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(cancel_);
  buttons->addWidget(resume_);
  buttons->addStretch();
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(progress_);
  layout->addWidget(status_);
  layout->addWidget(eta_);
  layout->addLayout(buttons);
  layout->addStretch();

  connect(cancel_, &QPushButton::clicked, this, [this] {
    if (!run_.running()) return;
    wizard_.trainer().cancel();
    cancel_->setEnabled(false);
    eta_->setText("Stopping after the current prompt…");
  });
  connect(resume_, &QPushButton::clicked, this, &TracePage::start);
  auto& t = wizard_.trainer();
  connect(&t, &PredictorTrainer::traceProgress, this, [this](const TraceProgress& p) {
    if (!run_.showsProgress()) return;
    progress_->setRange(0, std::max(1, p.prompts_total));
    progress_->setValue(p.prompts_done);
    status_->setText(QString("Traced %1 of %2 prompts (%3 tokens in %4 s this run).")
                         .arg(p.prompts_done)
                         .arg(p.prompts_total)
                         .arg(p.tokens_done)
                         .arg(p.seconds, 0, 'f', p.seconds < 10 ? 2 : 1));
    if (cancel_->isEnabled())
      eta_->setText(p.eta_seconds < 0 ? QString("Time left: known after the first prompt")
                                      : QString("Time left: %1").arg(secondsText(p.eta_seconds)));
  });
  connect(&t, &PredictorTrainer::traceFinished, this, [this](const TraceRunResult& r) {
    if (!run_.end()) return;
    cancel_->setEnabled(false);
    const int total = int(wizard_.prompts.size());
    const int on_disk = r.prompts_traced + r.prompts_skipped;
    if (r.cancelled) {
      eta_->setText(
          QString("Stopped. %1 of %2 prompts are on disk and kept: Resume continues from there; Back "
                  "changes the choice.")
              .arg(on_disk)
              .arg(total));
      resume_->show();
      resume_->setEnabled(true);
      return;
    }
    progress_->setRange(0, std::max(1, total));
    progress_->setValue(total);
    eta_->setText(QString("Done: %1 prompts traced (%2 of them in an earlier run), %3 tokens in %4 s.")
                      .arg(on_disk)
                      .arg(r.prompts_skipped)
                      .arg(r.tokens)
                      .arg(r.seconds, 0, 'f', r.seconds < 10 ? 2 : 1));
    done_ = true;
    emit completeChanged();
  });
  connect(&t, &PredictorTrainer::failed, this, [this](const QString& reason) {
    if (!run_.end()) return;
    cancel_->setEnabled(false);
    eta_->setText("Tracing failed: " + reason);
    resume_->setText("Try again");
    resume_->show();
  });
}

void TracePage::initializePage() {
  done_ = false;
  progress_->setRange(0, std::max<int>(1, int(wizard_.prompts.size())));
  progress_->setValue(0);
  status_->setText(QString("%1 → %2").arg(wizard_.sourceLabel, wizard_.tracePath));
  start();
}

void TracePage::start() {
  if (!run_.start()) return;
  done_ = false;
  resume_->hide();
  resume_->setText("Resume");
  cancel_->setEnabled(true);
  eta_->setText("Starting…");
  wizard_.trainer().trace(wizard_.prompts, wizard_.traceOptions, wizard_.tracePath);
  emit completeChanged();
}

void TracePage::cleanupPage() {
  if (!run_.leave()) return;
  wizard_.trainer().cancel();  // Back: stop; what is on disk stays for a resume
}

}  // namespace moe
