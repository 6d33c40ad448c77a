#include "ui/conversation_settings_dialog.h"

#include "ui/sampling_form.h"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QVBoxLayout>

namespace moe {

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
  sampling_ = new SamplingForm(own.value_or(defaults), this);
  sampling_->setEnabled(!use_defaults_->isChecked());
  connect(use_defaults_, &QCheckBox::toggled, sampling_, [this](bool on) { sampling_->setEnabled(!on); });

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* v = new QVBoxLayout(this);
  v->addWidget(new QLabel("System prompt", this));
  v->addWidget(system_, 1);
  v->addWidget(use_defaults_);
  v->addWidget(sampling_);
  v->addWidget(buttons);
  resize(520, 480);
}

QString ConversationSettingsDialog::systemPrompt() const { return system_->toPlainText().trimmed(); }

std::optional<SamplingDefaults> ConversationSettingsDialog::sampling() const {
  if (use_defaults_->isChecked()) return std::nullopt;
  return sampling_->values();
}

}  // namespace moe
