// Renders the app's main views to PNG files (used by `moechat --screenshot DIR`
// and committed under docs/screenshots/): the main window in the middle of a
// demo chat, in the light and dark themes, the settings dialog, the model
// wizard and the predictor wizard (training and evaluation on the demo model).
#pragma once

#include <QString>
#include <QWidget>
#include <functional>
#include <memory>

namespace moe {

class AppSettings;
class MainWindow;
class PredictorWizard;

// Returns the process exit code: 0 when every picture was written. make_wizard
// (optional) builds the model wizard, whose first page is rendered too.
// make_predictor_wizard (optional) builds the predictor wizard, driven here
// through a real run on the demo model (nothing is saved).
int renderScreenshots(
    MainWindow& window, AppSettings& settings, const QString& dir,
    const std::function<std::unique_ptr<QWidget>()>& make_wizard = nullptr,
    const std::function<std::unique_ptr<PredictorWizard>()>& make_predictor_wizard = nullptr);

}  // namespace moe
