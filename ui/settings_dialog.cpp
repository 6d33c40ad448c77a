#include "ui/settings_dialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QTabWidget>
#include <QVBoxLayout>
#include <algorithm>

#include "app/core/fit_words.h"
#include "app/core/use_traces.h"
#include "ui/number_box.h"
#include "ui/sampling_form.h"

namespace moe {
namespace {

constexpr double kSliderStepGb = 0.25;
// Without a GPU the budget plans for a card the model will run on: up to the
// largest single cards (80 GB, 141 GB) and beyond.
constexpr double kMaxBudgetGbWithoutGpu = 256.0;
// Without a GPU, the card the budget starts at when the user leaves auto.
constexpr double kPlanningCardGb = 16.0;

QString policyHelp(const QString& p) {
  if (p == "proactive")
    return "Predicts the experts of the next layers and copies them ahead of need; chunked copies, "
           "early preemption and reordering keep copies off the critical path.";
  if (p == "reactive-lru")
    return "Copies an expert when the gate asks for it; evicts the least recently used.";
  if (p == "static")
    return "Keeps the most-used experts pinned and streams the rest through two staging slots.";
  if (p == "cpu-experts")
    return "Computes a missed expert on the CPU from host RAM when that is sooner than copying it.";
  return {};
}

QLineEdit* folderRow(QFormLayout* form, const QString& label, const QString& value, QWidget* parent) {
  auto* row = new QWidget(parent);
  auto* h = new QHBoxLayout(row);
  h->setContentsMargins(0, 0, 0, 0);
  auto* edit = new QLineEdit(value, row);
  auto* browse = new QPushButton("Browse…", row);
  h->addWidget(edit, 1);
  h->addWidget(browse);
  QObject::connect(browse, &QPushButton::clicked, row, [edit, parent] {
    const QString dir = QFileDialog::getExistingDirectory(parent, "Choose a folder", edit->text());
    if (!dir.isEmpty()) edit->setText(dir);
  });
  form->addRow(label, row);
  return edit;
}

}  // namespace

SettingsDialog::SettingsDialog(AppSettings& settings, SettingsContext context, QWidget* parent)
    : QDialog(parent), settings_(settings), ctx_(std::move(context)) {
  setWindowTitle("Settings");
  setObjectName("settingsDialog");
  auto* tabs = new QTabWidget(this);
  tabs->addTab(buildOffloadTab(), "GPU && offload");
  tabs->addTab(buildSamplingTab(), "Sampling");
  tabs->addTab(buildGeneralTab(), "General");
  tabs->addTab(buildLearningTab(), "Learning from use");
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &SettingsDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &SettingsDialog::reject);
  apply_note_ = new QLabel(this);
  apply_note_->setObjectName("applyNote");
  apply_note_->setWordWrap(true);
  apply_note_->setTextFormat(Qt::PlainText);
  auto* v = new QVBoxLayout(this);
  v->addWidget(tabs);
  v->addWidget(apply_note_);
  v->addWidget(buttons);
  resize(620, 460);
  updateFit();
  connect(policy_, &QComboBox::currentTextChanged, this, &SettingsDialog::updateFit);
  connect(data_folder_, &QLineEdit::textChanged, this, &SettingsDialog::updateApplyNote);
  updateApplyNote();
}

QWidget* SettingsDialog::buildOffloadTab() {
  auto* page = new QWidget(this);
  auto* form = new QFormLayout(page);
  const double max_gb =
      ctx_.device.gpu ? static_cast<double>(ctx_.device.total_bytes) / 1e9 : kMaxBudgetGbWithoutGpu;

  auto_budget_ = new QCheckBox(ctx_.device.gpu || !ctx_.model
                                   ? "Auto (what the GPU has free after the model, less a safety margin)"
                                   : "Auto (no GPU: the model runs on the CPU)",
                               page);
  auto_budget_->setObjectName("autoBudget");
  budget_slider_ = new QSlider(Qt::Horizontal, page);
  budget_slider_->setObjectName("budgetSlider");
  budget_slider_->setRange(1, static_cast<int>(max_gb / kSliderStepGb));
  auto* budget_gb = new DoubleNumberBox(page);
  budget_gb_ = budget_gb;
  budget_gb_->setObjectName("budgetGb");
  budget_gb_->setRange(kSliderStepGb, max_gb);
  budget_gb_->setDecimals(2);
  budget_gb_->setSingleStep(kSliderStepGb);
  budget_gb_->setSuffix(" GB");
  auto* row = new QWidget(page);
  auto* h = new QHBoxLayout(row);
  h->setContentsMargins(0, 0, 0, 0);
  h->addWidget(budget_slider_, 1);
  h->addWidget(budget_gb->withProblemLine(), 0, Qt::AlignTop);

  const quint64 saved = settings_.vramBudgetBytes();
  auto_budget_->setChecked(saved == 0);
  // Auto shows (greyed) what it works out to on this GPU; without one, a card to plan for.
  const uint64_t auto_bytes =
      ctx_.device.free_bytes > kAutoVramMarginBytes ? ctx_.device.free_bytes - kAutoVramMarginBytes : 0;
  const double start_gb = saved             ? static_cast<double>(saved) / 1e9
                          : ctx_.device.gpu ? std::max(kSliderStepGb, static_cast<double>(auto_bytes) / 1e9)
                                            : std::min(max_gb, kPlanningCardGb);
  budget_gb_->setValue(start_gb);
  budget_slider_->setValue(static_cast<int>(start_gb / kSliderStepGb + 0.5));
  budget_slider_->setEnabled(saved != 0);
  budget_gb_->setEnabled(saved != 0);

  connect(budget_slider_, &QSlider::valueChanged, this, [this](int v) {
    const QSignalBlocker block(budget_gb_);
    budget_gb_->setValue(v * kSliderStepGb);
    updateFit();
  });
  connect(budget_gb_, &QDoubleSpinBox::valueChanged, this, [this](double gb) {
    const QSignalBlocker block(budget_slider_);
    budget_slider_->setValue(static_cast<int>(gb / kSliderStepGb + 0.5));
    updateFit();
  });
  connect(auto_budget_, &QCheckBox::toggled, this, [this](bool on) {
    budget_slider_->setEnabled(!on);
    budget_gb_->setEnabled(!on);
    updateFit();
  });

  fit_ = new QLabel(page);
  fit_->setObjectName("fitEstimate");
  fit_->setWordWrap(true);
  fit_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  policy_ = new QComboBox(page);
  policy_->setObjectName("policy");
  policy_->addItems(AppSettings::policies());
  policy_->setCurrentText(settings_.cachePolicy());
  policy_help_ = new QLabel(policyHelp(policy_->currentText()), page);
  policy_help_->setWordWrap(true);
  connect(policy_, &QComboBox::currentTextChanged, this,
          [this](const QString& p) { policy_help_->setText(policyHelp(p)); });

  auto* context = new IntNumberBox(page);
  context_ = context;
  context_->setObjectName("contextLength");
  // At most what the model was trained for: the context it loads with, not a wish.
  const int trained = ctx_.model && ctx_.model->config.n_ctx_train > 0 ? ctx_.model->config.n_ctx_train
                                                                       : AppSettings::kMaxContextLength;
  context_->setRange(std::min(AppSettings::kMinContextLength, trained),
                     std::min(AppSettings::kMaxContextLength, trained));
  context_->setSingleStep(1024);
  context_->setSuffix(" tokens");
  context_->setValue(std::min(ctx_.n_ctx, trained));
  initial_context_ = context_->value();
  context_->setToolTip(
      "How many tokens of the chat the model sees at once (prompt and reply); its KV cache "
      "takes memory in proportion. Capped at what the model was trained for.");
  connect(context_, &QSpinBox::valueChanged, this, [this] { updateFit(); });

  form->addRow("VRAM budget", auto_budget_);
  form->addRow("", row);
  form->addRow(ctx_.model_name.isEmpty() ? "Context length" : "Context length of " + ctx_.model_name,
               context->withProblemLine());
  form->addRow(ctx_.model_name.isEmpty() ? "What fits" : "Fit for " + ctx_.model_name, fit_);
  form->addRow("Caching policy", policy_);
  form->addRow("", policy_help_);
  return page;
}

QWidget* SettingsDialog::buildSamplingTab() {
  auto* page = new QWidget(this);
  auto* v = new QVBoxLayout(page);
  sampling_ = new SamplingForm(settings_.sampling(), page);
  v->addWidget(sampling_);
  v->addWidget(new QLabel("Defaults for new conversations; each conversation can override them.", page));
  v->addStretch(1);
  return page;
}

QWidget* SettingsDialog::buildGeneralTab() {
  auto* page = new QWidget(this);
  auto* form = new QFormLayout(page);
  models_folder_ = folderRow(form, "Models folder", settings_.modelsFolder(), page);
  models_folder_->setObjectName("modelsFolder");
  data_folder_ = folderRow(form, "Data folder (chats, predictors)", settings_.dataFolder(), page);
  data_folder_->setObjectName("dataFolder");
  theme_ = new QComboBox(page);
  theme_->setObjectName("theme");
  theme_->addItems({"system", "light", "dark"});
  theme_->setCurrentText(settings_.theme());
  form->addRow("Theme", theme_);
  return page;
}

QWidget* SettingsDialog::buildLearningTab() {
  auto* page = new QWidget(this);
  auto* v = new QVBoxLayout(page);
  learn_from_use_ = new QCheckBox("Learn from my chats to predict experts better", page);
  learn_from_use_->setObjectName("learnFromUse");
  learn_from_use_->setChecked(settings_.learnFromUse());
  auto* about = new QLabel(
      "When this is on, moechat records what the model computes while it answers you: for every token of "
      "your messages and its replies, the model's internal activations at each expert layer and the "
      "experts it chose. The recording stays on this computer (in the data folder, under use-traces), is "
      "never sent anywhere, and is used only to train a better expert predictor for that model, so that "
      "the right experts are copied to the GPU ahead of time. It is not the text of your chats, but "
      "treat it like your chats: parts of the text could be worked out from it.<br><br>"
      "Deleting a conversation deletes its recording at once; undoing the delete brings the conversation "
      "back, not its recording. A real model uses about 200 KB of disk per token (Qwen3-30B-A3B), so a "
      "long chat can take hundreds of MB. Off by default.",
      page);
  about->setWordWrap(true);
  about->setTextFormat(Qt::RichText);
  trace_usage_ = new QLabel(page);
  trace_usage_->setObjectName("useTraceUsage");
  trace_usage_->setWordWrap(true);
  delete_traces_ = new QPushButton("Delete all recorded traces", page);
  delete_traces_->setObjectName("deleteUseTraces");
  connect(delete_traces_, &QPushButton::clicked, this, [this] {
    UseTraceStore(settings_.useTracesFolder().toStdString()).removeAll();
    updateTraceUsage();
  });
  auto* row = new QHBoxLayout;
  row->addWidget(trace_usage_, 1);
  row->addWidget(delete_traces_);
  v->addWidget(learn_from_use_);
  v->addWidget(about);
  v->addLayout(row);
  v->addStretch(1);
  updateTraceUsage();
  return page;
}

void SettingsDialog::updateTraceUsage() {
  const UseTraceStore store(settings_.useTracesFolder().toStdString());
  int conversations = 0;
  qint64 tokens = 0;
  quint64 bytes = 0;
  for (const auto& s : store.summaries()) {
    conversations += s.conversations;
    tokens += s.tokens;
    bytes += s.bytes;
  }
  delete_traces_->setEnabled(bytes > 0);
  if (bytes == 0) {
    trace_usage_->setText("Nothing recorded so far.");
    return;
  }
  trace_usage_->setText(QString("Recorded so far: %1 MB on disk (%2 conversation(s), %3 tokens).")
                            .arg(static_cast<double>(bytes) / 1e6, 0, 'f', 1)
                            .arg(conversations)
                            .arg(tokens));
}

quint64 SettingsDialog::budgetBytes() const {
  return auto_budget_->isChecked() ? 0 : static_cast<quint64>(budget_gb_->value() * 1e9 + 0.5);
}

QString SettingsDialog::fitText() const { return fit_->text(); }

QString SettingsDialog::applyNote() const {
  return apply_note_->isHidden() ? QString() : apply_note_->text();
}

void SettingsDialog::updateApplyNote() {
  if (!apply_note_) return;  // the tabs are still being built
  QStringList notes;
  const bool offload_changed = budgetBytes() != settings_.vramBudgetBytes() ||
                               policy_->currentText() != settings_.cachePolicy() ||
                               context_->value() != initial_context_;
  if (ctx_.model_loaded && offload_changed) {
    const QString name = ctx_.model_name.isEmpty() ? QString("the model") : ctx_.model_name;
    notes << (ctx_.reply_running
                  ? QString("OK reloads %1 with the new settings once the reply in progress ends.").arg(name)
                  : QString("OK reloads %1 with the new settings.").arg(name));
  }
  if (data_folder_->text() != settings_.dataFolder())
    notes << "Chats are read from the new data folder from the next start; the files are not moved.";
  apply_note_->setText(notes.join(' '));
  apply_note_->setVisible(!notes.isEmpty());
}

void SettingsDialog::updateFit() {
  if (!context_) return;  // the offload tab is still being built
  updateApplyNote();
  if (!ctx_.model) {
    plan_.reset();
    fit_->setText("Load a model to see what fits.");
    return;
  }
  PlanRequest request;
  request.budget = BudgetSetting::fromAppSetting(budgetBytes());
  request.policy = parsePolicy(policy_->currentText().toStdString());
  request.n_ctx = context_->value();
  request.demo = ctx_.demo;
  plan_ = resolveLoadPlan(request, *ctx_.model, ctx_.device);
  QString text = QString::fromStdString(planSummary(*plan_, ctx_.host_available_bytes));
  if (plan_->onCpuOnly()) text += " Pick a budget to see what would fit on a card with that much memory.";
  fit_->setText(text);
}

void SettingsDialog::accept() {
  settings_.setVramBudgetBytes(budgetBytes());
  settings_.setCachePolicy(policy_->currentText());
  if (ctx_.model_loaded && context_->value() != initial_context_)
    settings_.setContextLength(ctx_.model_path, context_->value());
  settings_.setSampling(sampling_->values());
  settings_.setModelsFolder(models_folder_->text());
  settings_.setDataFolder(data_folder_->text());
  settings_.setTheme(theme_->currentText());
  settings_.setLearnFromUse(learn_from_use_->isChecked());
  QDialog::accept();
}

}  // namespace moe
