// moechat: the desktop app.
#include <QApplication>

#include "ui/main_window.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setApplicationName("moechat");
  QApplication::setOrganizationName("moechat");
  moe::MainWindow window;
  window.show();
  return app.exec();
}
