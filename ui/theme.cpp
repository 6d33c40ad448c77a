#include "ui/theme.h"

#include <QApplication>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>

namespace moe {
namespace {

QPalette darkPalette() {
  QPalette p;
  const QColor window(0x23, 0x25, 0x29), base(0x1b, 0x1d, 0x21), text(0xe6, 0xe6, 0xe6);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, window);
  p.setColor(QPalette::ToolTipBase, base);
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::PlaceholderText, QColor(0x8f, 0x94, 0x9b));
  p.setColor(QPalette::Button, QColor(0x2d, 0x30, 0x35));
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, Qt::white);
  p.setColor(QPalette::Highlight, QColor(0x3d, 0x8b, 0xd9));
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Link, QColor(0x6c, 0xb0, 0xf0));
  p.setColor(QPalette::Mid, QColor(0x4a, 0x4e, 0x55));
  p.setColor(QPalette::Midlight, QColor(0x36, 0x39, 0x3f));
  p.setColor(QPalette::Disabled, QPalette::Text, QColor(0x70, 0x74, 0x7a));
  p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(0x70, 0x74, 0x7a));
  return p;
}

QPalette lightPalette() {
  QPalette p = QStyleFactory::create("Fusion")->standardPalette();
  p.setColor(QPalette::Window, QColor(0xf4, 0xf5, 0xf7));
  p.setColor(QPalette::Base, Qt::white);
  p.setColor(QPalette::AlternateBase, QColor(0xee, 0xf0, 0xf3));
  p.setColor(QPalette::Highlight, QColor(0x2f, 0x7b, 0xd0));
  p.setColor(QPalette::PlaceholderText, QColor(0x70, 0x76, 0x80));
  p.setColor(QPalette::Midlight, QColor(0xe3, 0xe6, 0xea));
  return p;
}

}  // namespace

void applyTheme(QApplication& app, const QString& theme) {
  app.setStyle(QStyleFactory::create("Fusion"));
  if (theme == "dark")
    app.setPalette(darkPalette());
  else if (theme == "light")
    app.setPalette(lightPalette());
  else
    app.setPalette(app.style()->standardPalette());
}

bool isDarkPalette() { return QApplication::palette().color(QPalette::Window).lightness() < 128; }

}  // namespace moe
