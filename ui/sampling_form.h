// The sampling fields (temperature, top-p, top-k, min-p, repetition penalty,
// max reply tokens) as one form, shared by Settings (the defaults) and a
// conversation's own settings.
#pragma once

#include <QWidget>

#include "app/qt/app_settings.h"

class QDoubleSpinBox;
class QFormLayout;
class QSpinBox;

namespace moe {

class SamplingForm : public QWidget {
  Q_OBJECT

 public:
  explicit SamplingForm(const SamplingDefaults& values, QWidget* parent = nullptr);
  SamplingDefaults values() const;
  QFormLayout* form() const { return form_; }

 private:
  QFormLayout* form_;
  QDoubleSpinBox* temperature_;
  QDoubleSpinBox* top_p_;
  QSpinBox* top_k_;
  QDoubleSpinBox* min_p_;
  QDoubleSpinBox* repeat_penalty_;
  QSpinBox* max_tokens_;
};

}  // namespace moe
