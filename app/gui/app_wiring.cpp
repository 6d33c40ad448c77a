#include "app/gui/app_wiring.h"

#include <QFileInfo>

namespace moe {

AppWiring::AppWiring(MainWindow& window, AppSettings& settings, ModelRegistry& registry, AppDatabase& db)
    : window_(window), settings_(settings), registry_(registry), db_(db) {
  window_.setModelListSource([this] {
    std::vector<ModelChoice> out;
    for (const auto& m : registry_.list()) {
      const QString path = QString::fromStdString(m.path);
      if (!QFileInfo::exists(path)) continue;  // moved or deleted since it was registered
      out.push_back({m.name.empty() ? QFileInfo(path).fileName() : QString::fromStdString(m.name), path});
    }
    return out;
  });
}

}  // namespace moe
