// One conversation's system prompt and sampling (its own values, or the
// defaults from Settings).
#pragma once

#include <QDialog>
#include <optional>

#include "app/qt/app_settings.h"

class QCheckBox;
class QPlainTextEdit;

namespace moe {

class SamplingForm;

class ConversationSettingsDialog : public QDialog {
  Q_OBJECT

 public:
  ConversationSettingsDialog(const QString& system_prompt, std::optional<SamplingDefaults> own,
                             const SamplingDefaults& defaults, QWidget* parent = nullptr);

  QString systemPrompt() const;
  // nullopt: use the defaults.
  std::optional<SamplingDefaults> sampling() const;

 private:
  QPlainTextEdit* system_;
  QCheckBox* use_defaults_;
  SamplingForm* sampling_;
};

}  // namespace moe
