// Light and dark themes: the Fusion style with our palettes, so the app looks
// the same on every desktop; "system" keeps the platform's palette.
#pragma once

#include <QString>

class QApplication;

namespace moe {

void applyTheme(QApplication& app, const QString& theme);
bool isDarkPalette();

}  // namespace moe
