#include "app/core/demo_model.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <vector>

namespace moe {

std::string trainedDemoModelPath(std::string* looked_in) {
  std::vector<std::filesystem::path> candidates;
  if (const char* env = std::getenv("MOECHAT_DEMO_MODEL"); env && *env) {
    candidates.emplace_back(env);
  } else {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec)
      for (const char* up : {"..", "../.."})
        candidates.push_back(
            (exe.parent_path() / up / "share" / "moechat" / kTrainedDemoFile).lexically_normal());
  }
  std::string looked;
  for (const auto& c : candidates) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(c, ec)) return c.string();
    looked += (looked.empty() ? "" : ", ") + c.string();
  }
  if (looked_in) *looked_in = looked.empty() ? "(the running program's folder is unknown)" : looked;
  return {};
}

std::string requireTrainedDemoModel() {
  std::string looked;
  std::string path = trainedDemoModelPath(&looked);
  if (path.empty())
    throw std::runtime_error("the demo model file is missing (looked for " + looked +
                             "); reinstall moechat, or use --demo-random for the random-weight demo");
  return path;
}

DemoModel appDemoModel() {
  static const DemoModel kind = trainedDemoModelPath().empty() ? DemoModel::kRandom : DemoModel::kTrained;
  return kind;
}

std::string demoModelName(DemoModel kind) {
  return kind == DemoModel::kTrained ? "Demo model (Brown corpus)" : "Demo model (random weights)";
}

}  // namespace moe
