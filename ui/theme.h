// Light and dark themes: the Fusion style with our palettes, so the app looks
// the same on every desktop; "system" keeps the platform's palette.
#pragma once

#include <QColor>
#include <QString>

class QApplication;
class QPalette;

namespace moe {

void applyTheme(QApplication& app, const QString& theme);
bool isDarkPalette();

// Red text that reads on the palette's window (WCAG contrast 4.5:1 or more, light or dark).
QColor errorColor(const QPalette& palette);
// The WCAG 2 contrast ratio of two colours, 1 (same) to 21 (black on white).
double contrastRatio(const QColor& a, const QColor& b);

}  // namespace moe
