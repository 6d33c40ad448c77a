#include "ui/main_window.h"

namespace moe {

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) { setWindowTitle("moechat"); }

}  // namespace moe
