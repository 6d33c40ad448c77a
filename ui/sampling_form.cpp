#include "ui/sampling_form.h"

#include <QFormLayout>

#include "ui/number_box.h"

namespace moe {
namespace {

DoubleNumberBox* number(QWidget* parent, const char* name, double lo, double hi, double step, double value) {
  auto* box = new DoubleNumberBox(parent);
  box->setObjectName(name);
  box->setRange(lo, hi);
  box->setSingleStep(step);
  box->setDecimals(2);
  box->setValue(value);
  return box;
}

IntNumberBox* count(QWidget* parent, const char* name, int lo, int hi, int value) {
  auto* box = new IntNumberBox(parent);
  box->setObjectName(name);
  box->setRange(lo, hi);
  box->setValue(value);
  return box;
}

}  // namespace

SamplingForm::SamplingForm(const SamplingDefaults& s, QWidget* parent) : QWidget(parent) {
  form_ = new QFormLayout(this);
  form_->setContentsMargins(0, 0, 0, 0);
  auto* temperature = number(this, "temperature", 0, 2, 0.05, s.temperature);
  auto* top_p = number(this, "topP", 0, 1, 0.05, s.top_p);
  auto* top_k = count(this, "topK", 0, 1000, s.top_k);
  auto* min_p = number(this, "minP", 0, 1, 0.01, s.min_p);
  auto* repeat_penalty = number(this, "repeatPenalty", 1, 2, 0.05, s.repeat_penalty);
  auto* max_tokens = count(this, "maxTokens", 1, SamplingDefaults::kMaxTokensLimit, s.max_tokens);
  form_->addRow("Temperature (0 = greedy)", temperature->withProblemLine());
  form_->addRow("Top-p", top_p->withProblemLine());
  form_->addRow("Top-k (0 = off)", top_k->withProblemLine());
  form_->addRow("Min-p", min_p->withProblemLine());
  form_->addRow("Repetition penalty", repeat_penalty->withProblemLine());
  form_->addRow("Max reply tokens", max_tokens->withProblemLine());
  temperature_ = temperature;
  top_p_ = top_p;
  top_k_ = top_k;
  min_p_ = min_p;
  repeat_penalty_ = repeat_penalty;
  max_tokens_ = max_tokens;
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
