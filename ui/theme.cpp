#include "ui/theme.h"

#include <QApplication>
#include <QPainter>
#include <QPalette>
#include <QProxyStyle>
#include <QStyle>
#include <QStyleFactory>
#include <QStyleOption>
#include <cmath>
#include <memory>

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
  p.setColor(QPalette::Link, QColor(0x8e, 0xc6, 0xff));
  p.setColor(QPalette::Mid, QColor(0x4a, 0x4e, 0x55));
  p.setColor(QPalette::Midlight, QColor(0x36, 0x39, 0x3f));
  p.setColor(QPalette::Disabled, QPalette::Text, QColor(0x70, 0x74, 0x7a));
  p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(0x70, 0x74, 0x7a));
  return p;
}

QPalette lightPalette() {
  const std::unique_ptr<QStyle> fusion(QStyleFactory::create("Fusion"));
  QPalette p = fusion->standardPalette();
  p.setColor(QPalette::Window, QColor(0xf4, 0xf5, 0xf7));
  p.setColor(QPalette::Base, Qt::white);
  p.setColor(QPalette::AlternateBase, QColor(0xee, 0xf0, 0xf3));
  p.setColor(QPalette::Highlight, QColor(0x2f, 0x7b, 0xd0));
  p.setColor(QPalette::PlaceholderText, QColor(0x70, 0x76, 0x80));
  p.setColor(QPalette::Midlight, QColor(0xe3, 0xe6, 0xea));
  return p;
}

// Fusion draws the ring of radio buttons and check boxes a shade darker than the
// window: on a dark window it all but disappears. This draws it in the palette's
// placeholder grey, which reads on both palettes.
class VisibleIndicators : public QProxyStyle {
 public:
  VisibleIndicators() : QProxyStyle(QStyleFactory::create("Fusion")) {}

  void drawPrimitive(PrimitiveElement pe, const QStyleOption* opt, QPainter* p,
                     const QWidget* w) const override {
    QProxyStyle::drawPrimitive(pe, opt, p, w);
    if (pe != PE_IndicatorRadioButton && pe != PE_IndicatorCheckBox) return;
    if (opt->palette.color(QPalette::Window).lightness() >= 128) return;  // Fusion's ring reads on light
    p->save();
    p->setRenderHint(QPainter::Antialiasing, true);
    p->setBrush(Qt::NoBrush);
    p->setPen(QPen(opt->palette.color(QPalette::PlaceholderText), 1.2));
    const QRectF r = QRectF(opt->rect).adjusted(1, 1, -1, -1);
    if (pe == PE_IndicatorRadioButton)
      p->drawEllipse(r);
    else
      p->drawRoundedRect(r, 2, 2);
    p->restore();
  }
};

double luminance(const QColor& c) {
  auto lin = [](double v) { return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * lin(c.redF()) + 0.7152 * lin(c.greenF()) + 0.0722 * lin(c.blueF());
}

}  // namespace

double contrastRatio(const QColor& a, const QColor& b) {
  const double la = luminance(a), lb = luminance(b);
  return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

QColor errorColor(const QPalette& palette) {
  return palette.color(QPalette::Window).lightness() < 128 ? QColor(0xff, 0x8a, 0x80)
                                                           : QColor(0xb0, 0x00, 0x20);
}

void applyTheme(QApplication& app, const QString& theme) {
  app.setStyle(new VisibleIndicators);
  if (theme == "dark")
    app.setPalette(darkPalette());
  else if (theme == "light")
    app.setPalette(lightPalette());
  else
    app.setPalette(app.style()->standardPalette());
}

bool isDarkPalette() { return QApplication::palette().color(QPalette::Window).lightness() < 128; }

}  // namespace moe
