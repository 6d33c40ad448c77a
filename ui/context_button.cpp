#include "ui/context_button.h"

#include <QAction>
#include <QActionGroup>
#include <QLocale>
#include <QMenu>
#include <algorithm>

#include "app/qt/app_settings.h"

namespace moe {

std::vector<int> contextChoices(int current, int trained) {
  const int most = std::clamp(trained > 0 ? trained : AppSettings::kMaxContextLength,
                              AppSettings::kMinContextLength, AppSettings::kMaxContextLength);
  std::vector<int> out;
  // A small model (the demo) gets the short lengths too; a large one starts at 1,024.
  for (int n = most < 4096 ? AppSettings::kMinContextLength : 1024; n <= most; n *= 2) out.push_back(n);
  out.push_back(most);
  if (current >= AppSettings::kMinContextLength && current <= most) out.push_back(current);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

ContextButton::ContextButton(QWidget* parent) : QPushButton(parent) {
  setObjectName("contextButton");
  setAutoDefault(false);
  menu_ = new QMenu(this);
  menu_->setObjectName("contextMenu");
  setMenu(menu_);
  clearModel();
}

void ContextButton::showModel(const QString& model_name, int current, int trained,
                              std::function<QString(int)> note) {
  model_name_ = model_name;
  current_ = current;
  note_ = std::move(note);
  choices_ = contextChoices(current, trained);
  setText(QStringLiteral("Context %1").arg(QLocale().toString(current)));
  setToolTip(QStringLiteral("The context length of %1: how many tokens of the chat it sees at once "
                            "(prompt and reply). Its KV cache takes memory in proportion; a change "
                            "reloads the model.")
                 .arg(model_name));
  setEnabled(true);
  rebuildMenu();
}

void ContextButton::clearModel() {
  model_name_.clear();
  current_ = 0;
  choices_.clear();
  setText(QStringLiteral("Context"));
  setToolTip(QStringLiteral("The model's context length (load a model first)"));
  setEnabled(false);
  rebuildMenu();
}

void ContextButton::rebuildMenu() {
  menu_->clear();
  if (choices_.empty()) return;
  auto* group = new QActionGroup(menu_);
  for (const int n : choices_) {
    QString label = QStringLiteral("%1 tokens").arg(QLocale().toString(n));
    if (note_)
      if (const QString note = note_(n); !note.isEmpty()) label += QStringLiteral(" · ") + note;
    QAction* a = menu_->addAction(label);
    a->setCheckable(true);
    a->setChecked(n == current_);
    a->setData(n);
    group->addAction(a);
    connect(a, &QAction::triggered, this, [this, n] {
      if (n != current_) emit contextChosen(n);
    });
  }
  menu_->addSeparator();
  connect(menu_->addAction(QStringLiteral("Other length… (Settings)")), &QAction::triggered, this,
          &ContextButton::otherRequested);
}

}  // namespace moe
