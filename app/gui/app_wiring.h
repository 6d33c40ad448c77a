// Connects the main window to the app's stores: the installed models for the
// model menu, and (with the download wizard) adding a model.
#pragma once

#include "app/core/app_database.h"
#include "app/core/model_registry.h"
#include "app/qt/app_settings.h"
#include "ui/main_window.h"

namespace moe {

class AppWiring {
 public:
  AppWiring(MainWindow& window, AppSettings& settings, ModelRegistry& registry, AppDatabase& db);

 private:
  MainWindow& window_;
  AppSettings& settings_;
  ModelRegistry& registry_;
  AppDatabase& db_;
};

}  // namespace moe
