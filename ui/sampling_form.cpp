#include "ui/sampling_form.h"

#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QSpinBox>

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

QSpinBox* count(QWidget* parent, const char* name, int lo, int hi, int value) {
  auto* box = new QSpinBox(parent);
  box->setObjectName(name);
  box->setRange(lo, hi);
  box->setValue(value);
  return box;
}

}  // namespace

SamplingForm::SamplingForm(const SamplingDefaults& s, QWidget* parent) : QWidget(parent) {
  form_ = new QFormLayout(this);
  form_->setContentsMargins(0, 0, 0, 0);
  temperature_ = number(this, "temperature", 0, 2, 0.05, s.temperature);
  top_p_ = number(this, "topP", 0, 1, 0.05, s.top_p);
  top_k_ = count(this, "topK", 0, 1000, s.top_k);
  min_p_ = number(this, "minP", 0, 1, 0.01, s.min_p);
  repeat_penalty_ = number(this, "repeatPenalty", 1, 2, 0.05, s.repeat_penalty);
  max_tokens_ = count(this, "maxTokens", 1, 32768, s.max_tokens);
  form_->addRow("Temperature (0 = greedy)", temperature_);
  form_->addRow("Top-p", top_p_);
  form_->addRow("Top-k (0 = off)", top_k_);
  form_->addRow("Min-p", min_p_);
  form_->addRow("Repetition penalty", repeat_penalty_);
  form_->addRow("Max reply tokens", max_tokens_);
}

SamplingDefaults SamplingForm::values() const {
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
