// Renders the app's main views to PNG files (used by `moechat --screenshot DIR`
// and committed under docs/screenshots/): the main window in the middle of a
// demo chat, in the light and dark themes, and the settings dialog.
#pragma once

#include <QString>

namespace moe {

class AppSettings;
class MainWindow;

// Returns the process exit code: 0 when every picture was written.
int renderScreenshots(MainWindow& window, AppSettings& settings, const QString& dir);

}  // namespace moe
