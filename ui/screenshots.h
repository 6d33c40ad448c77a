// Renders the app's main views to PNG files (used by `moechat --screenshot DIR`
// and committed under docs/screenshots/): the main window in the middle of a
// demo chat, in the light and dark themes, the settings dialog, the model
// wizard and the predictor wizard (training and evaluation on the demo model);
// then, on a 1280x800 and a 1024x700 screen each (name-WxH.png): the chat
// following a long reply, the dark theme, the settings with an 80 GB budget, the
// models view and the model wizard's Hugging Face search (when its hub answers).
#pragma once

#include <QString>
#include <QWidget>
#include <functional>
#include <memory>

namespace moe {

class AppSettings;
class MainWindow;
class PredictorWizard;

class ModelWizard;

// What builds the dialogs (each optional: a missing one is not rendered).
struct ScreenshotSources {
  std::function<std::unique_ptr<ModelWizard>()> model_wizard;  // its first page and its hub search
  // Driven through a real run on the demo model (nothing is saved).
  std::function<std::unique_ptr<PredictorWizard>()> predictor_wizard;
  std::function<std::unique_ptr<QWidget>()> models_view;
  QString hub_query = QStringLiteral("qwen3 moe");  // what the hub search picture searches for
};

// Returns the process exit code: 0 when every picture was written.
int renderScreenshots(MainWindow& window, AppSettings& settings, const QString& dir,
                      const ScreenshotSources& sources);

}  // namespace moe
