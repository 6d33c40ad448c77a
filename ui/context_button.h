// The model menu's context length: a button beside the model combo showing the
// loaded model's context ("Context 4,096") whose menu offers the lengths the model
// was trained for (powers of two, the trained length and the one set), each with
// the memory its KV cache takes, and "Other length…" (the settings dialog). A choice
// is the same per-model setting as the settings dialog's (AppSettings::contextLength).
#pragma once

#include <QPushButton>
#include <functional>
#include <vector>

class QMenu;

namespace moe {

// A push button: its size hint counts the menu's arrow, so the arrow never covers the text.
class ContextButton : public QPushButton {
  Q_OBJECT

 public:
  explicit ContextButton(QWidget* parent = nullptr);

  // The loaded model: `current` tokens now, at most `trained`; note(n) says what a
  // context of n costs ("KV cache 64.0 MB"), or "" to say nothing.
  void showModel(const QString& model_name, int current, int trained, std::function<QString(int)> note);
  // No model loaded: the button is off.
  void clearModel();
  // The lengths the menu offers, shortest first.
  const std::vector<int>& choices() const { return choices_; }
  int current() const { return current_; }

 signals:
  void contextChosen(int tokens);
  void otherRequested();  // "Other length…": the settings dialog

 private:
  void rebuildMenu();

  QMenu* menu_ = nullptr;
  QString model_name_;
  int current_ = 0;
  std::vector<int> choices_;
  std::function<QString(int)> note_;
};

// The lengths offered for a model trained for `trained` tokens with `current` set:
// powers of two from 1,024 (from 256 when it is under 4,096) up to the trained length,
// the trained length itself and
// the current one, each once, shortest first.
std::vector<int> contextChoices(int current, int trained);

}  // namespace moe
