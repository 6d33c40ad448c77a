// The main window: conversations on the left, the chat on the right, the live
// performance strip at the bottom.
#pragma once

#include <QMainWindow>

namespace moe {

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
};

}  // namespace moe
