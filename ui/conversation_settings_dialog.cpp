#include "ui/conversation_settings_dialog.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSpinBox>
#include <QVBoxLayout>

namespace moe {
namespace {

QDoubleSpinBox* number(QWidget* parent, const char* name, double lo, double hi, double step, double value) {
  auto* box = new QDoubleSpinBox(parent);
  box->setObjectName(name);
  box->setRange(lo, hi);
  box->setSingleStep(step);
  box->setDecimals(2);
  box->setValue(value);
  return box;
}

}  // namespace

ConversationSettingsDialog::ConversationSettingsDialog(const QString& system_prompt,
                                                       std::optional<SamplingDefaults> own,
                                                       const SamplingDefaults& defaults, QWidget* parent)
    : QDialog(parent) {
  setWindowTitle("Chat settings");
  setObjectName("conversationSettings");
  system_ = new QPlainTextEdit(system_prompt, this);
  system_->setObjectName("systemPrompt");
  system_->setPlaceholderText("Instructions the model sees before the conversation (optional)");
  use_defaults_ = new QCheckBox("Use the defaults from Settings", this);
  use_defaults_->setObjectName("useDefaults");
  use_defaults_->setChecked(!own.has_value());
  const SamplingDefaults s = own.value_or(defaults);
  temperature_ = number(this, "temperature", 0, 2, 0.05, s.temperature);
  top_p_ = number(this, "topP", 0, 1, 0.05, s.top_p);
  min_p_ = number(this, "minP", 0, 1, 0.01, s.min_p);
  repeat_penalty_ = number(this, "repeatPenalty", 1, 2, 0.05, s.repeat_penalty);
  top_k_ = new QSpinBox(this);
  top_k_->setObjectName("topK");
  top_k_->setRange(0, 1000);
  top_k_->setValue(s.top_k);
  max_tokens_ = new QSpinBox(this);
  max_tokens_->setObjectName("maxTokens");
  max_tokens_->setRange(1, 32768);
  max_tokens_->setValue(s.max_tokens);

  auto* samplingBox = new QWidget(this);
  auto* form = new QFormLayout(samplingBox);
  form->addRow("Temperature (0 = greedy)", temperature_);
  form->addRow("Top-p", top_p_);
  form->addRow("Top-k (0 = off)", top_k_);
  form->addRow("Min-p", min_p_);
  form->addRow("Repetition penalty", repeat_penalty_);
  form->addRow("Max reply tokens", max_tokens_);
  samplingBox->setEnabled(!use_defaults_->isChecked());
  connect(use_defaults_, &QCheckBox::toggled, samplingBox,
          [samplingBox](bool on) { samplingBox->setEnabled(!on); });

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* v = new QVBoxLayout(this);
  v->addWidget(new QLabel("System prompt", this));
  v->addWidget(system_, 1);
  v->addWidget(use_defaults_);
  v->addWidget(samplingBox);
  v->addWidget(buttons);
  resize(520, 480);
}

QString ConversationSettingsDialog::systemPrompt() const { return system_->toPlainText().trimmed(); }

std::optional<SamplingDefaults> ConversationSettingsDialog::sampling() const {
  if (use_defaults_->isChecked()) return std::nullopt;
  SamplingDefaults s;
  s.temperature = temperature_->value();
  s.top_p = top_p_->value();
  s.top_k = top_k_->value();
  s.min_p = min_p_->value();
  s.repeat_penalty = repeat_penalty_->value();
  s.max_tokens = max_tokens_->value();
  return s;
}

}  // namespace moe
