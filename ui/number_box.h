// Number boxes that never drop a keystroke. A plain QSpinBox refuses the digit
// that would pass its range, so typing 80 under a maximum of 48 gives 8 and
// "-5" gives 5, without a word. These keep what is typed; a number outside the
// range is not applied: a line under the box says so while it is typed and after
// editing ends, and the box keeps the value it had before.
#pragma once

#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QSpinBox>
#include <QVBoxLayout>
#include <optional>

namespace moe {

template <class SpinBox>
class CheckedNumberBox : public SpinBox {
 public:
  explicit CheckedNumberBox(QWidget* parent = nullptr) : SpinBox(parent) {
    // Applied when editing ends (Enter, leaving the box, the arrows), so a refused
    // number leaves the value from before the edit, not the digits typed so far.
    this->setKeyboardTracking(false);
    problem_ = new QLabel(parent);
    problem_->setWordWrap(true);
    problem_->setTextFormat(Qt::PlainText);
    problem_->hide();
    QObject::connect(this->lineEdit(), &QLineEdit::textChanged, problem_, [this](const QString& text) {
      showProblem(outOfRange(text) ? whyNot(text) : QString());
    });
    QObject::connect(this, &QAbstractSpinBox::editingFinished, problem_, [this] {
      if (refused_.isEmpty()) return;
      showProblem(QString("Not applied: %1 (kept %2)").arg(whyNot(refused_), this->text()));
      refused_.clear();
    });
  }

  // The box above its problem line, for a form row; names the line <box>Problem.
  QWidget* withProblemLine() {
    auto* column = new QWidget(this->parentWidget());
    auto* v = new QVBoxLayout(column);
    v->setContentsMargins(0, 0, 0, 0);
    v->setSpacing(2);
    this->setParent(column);
    problem_->setParent(column);
    problem_->setObjectName(this->objectName() + "Problem");
    v->addWidget(this);
    v->addWidget(problem_);
    return column;
  }
  QLabel* problemLine() const { return problem_; }

  QValidator::State validate(QString& input, int& pos) const override {
    const QValidator::State state = SpinBox::validate(input, pos);
    if (state != QValidator::Invalid) return state;
    const QString typed = bare(input);
    const bool sign_only = typed == this->locale().negativeSign() || typed == this->locale().positiveSign();
    return sign_only || outOfRange(input) ? QValidator::Intermediate : QValidator::Invalid;
  }

  void fixup(QString& input) const override {
    SpinBox::fixup(input);
    if (outOfRange(input)) refused_ = input;
  }

 private:
  QString bare(QString text) const {
    text = text.trimmed();
    const QString prefix = this->prefix().trimmed(), suffix = this->suffix().trimmed();
    if (!prefix.isEmpty() && text.startsWith(prefix)) text.remove(0, prefix.size());
    if (!suffix.isEmpty() && text.endsWith(suffix)) text.chop(suffix.size());
    return text.trimmed();
  }

  std::optional<double> number(const QString& text) const {
    bool ok = false;
    const double v = this->locale().toDouble(bare(text), &ok);
    if (!ok) return std::nullopt;
    return v;
  }

  bool outOfRange(const QString& text) const {
    const auto v = number(text);
    return v && (*v < this->minimum() || *v > this->maximum());
  }

  QString whyNot(const QString& text) const {
    const double v = number(text).value_or(0);
    const bool above = v > this->maximum();
    return QString("%1%2 is %3 the %4, %5%6")
        .arg(bare(text), this->suffix(), above ? "more than" : "less than", above ? "maximum" : "minimum",
             this->textFromValue(above ? this->maximum() : this->minimum()), this->suffix());
  }

  void showProblem(const QString& text) {
    problem_->setText(text);
    problem_->setVisible(!text.isEmpty());
  }

  QLabel* problem_;
  mutable QString refused_;  // the out-of-range text editing ended on
};

using DoubleNumberBox = CheckedNumberBox<QDoubleSpinBox>;
using IntNumberBox = CheckedNumberBox<QSpinBox>;

}  // namespace moe
