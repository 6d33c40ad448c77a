#include "app/core/installed_models.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "app/core/fit_words.h"
#include "app/core/model_predictor.h"
#include "app/core/model_shape.h"
#include "app/core/predictor_store.h"
#include "models/gguf.h"

namespace moe {
namespace {

// The tensor type holding most of the file's bytes ("Q8_0", "Q4_K").
std::string dominantQuant(const std::string& path) {
  const gguf::GgufFile f = gguf::GgufFile::open(path);
  std::map<gguf::TensorType, uint64_t> bytes;
  for (const auto& t : f.tensors()) bytes[t.type] += t.nbytes;
  auto best = std::max_element(bytes.begin(), bytes.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  return best == bytes.end() ? std::string() : gguf::tensorTypeName(best->first);
}

void describe(InstalledModel& m, const PlanInputs& inputs, uint64_t ram) {
  try {
    const ModelShape shape = describeModel(m.path, m.demo, appDemoModel());
    if (m.architecture.empty()) m.architecture = shape.config.arch_name;
    if (m.name.empty()) m.name = shape.config.model_name;
    m.n_ctx = shape.config.n_ctx_train;
    if (m.quant.empty() && !m.demo) m.quant = dominantQuant(m.path);
    if (m.size_bytes == 0)
      m.size_bytes = m.demo ? shape.sizes.other_bytes + shape.sizes.routed_expert_bytes
                            : std::filesystem::file_size(m.path);
    const int n_ctx = inputs.context_of ? inputs.context_of(m.path) : 4096;
    const LoadPlan plan =
        resolveLoadPlan({inputs.budget, inputs.policy, n_ctx, m.demo}, shape, inputs.device);
    m.fit = planShort(plan);
    m.fit_detail = planSummary(plan, ram);
  } catch (const std::exception& e) {
    m.readable = false;
    m.fit = std::string("cannot read: ") + e.what();
    m.fit_detail = m.fit;
  }
}

}  // namespace

std::vector<InstalledModel> listInstalledModels(AppDatabase& db, ModelRegistry& registry,
                                                const std::vector<std::string>& folder_files,
                                                const PlanInputs& inputs, bool read_files) {
  const uint64_t ram = read_files ? availableHostRam() : 0;
  auto describeIf = [&](InstalledModel& m) {
    if (read_files) describe(m, inputs, ram);
  };
  std::vector<InstalledModel> out;
  InstalledModel demo;
  demo.demo = true;
  demo.name = demoModelName(appDemoModel());
  demo.quant = appDemoModel() == DemoModel::kTrained ? "Q8_0" : "F32";
  demo.sha256 = demoModelSha256();
  demo.predictor = predictorNote(storedPredictorInfo(db, demo.sha256));
  describeIf(demo);
  out.push_back(demo);

  std::set<std::string> in_folder;
  for (const std::string& path : folder_files)
    in_folder.insert(std::filesystem::absolute(path).lexically_normal().string());
  std::set<std::string> listed;
  for (const ModelRecord& r : registry.list()) {
    std::error_code ec;
    if (r.path.empty() || !std::filesystem::is_regular_file(r.path, ec)) continue;  // moved or deleted
    const std::string abs = std::filesystem::absolute(r.path).lexically_normal().string();
    if (!listed.insert(abs).second) continue;
    InstalledModel m;
    m.name = r.name.empty() ? std::filesystem::path(r.path).filename().string() : r.name;
    m.path = r.path;
    m.architecture = r.arch;
    m.quant = r.quant;
    m.size_bytes = uint64_t(std::max<int64_t>(0, r.size_bytes));
    m.sha256 = r.sha256;
    m.registry_id = r.id;
    m.in_models_folder = in_folder.count(abs) > 0;
    m.predictor = predictorNote(storedPredictorInfo(db, r.sha256));
    describeIf(m);
    out.push_back(m);
  }
  for (const std::string& path : folder_files) {
    const std::string abs = std::filesystem::absolute(path).lexically_normal().string();
    if (!listed.insert(abs).second) continue;
    InstalledModel m;
    m.path = path;
    m.name = std::filesystem::path(path).filename().string();
    m.in_models_folder = true;
    describeIf(m);
    out.push_back(m);
  }
  return out;
}

std::string forgetInstalledModel(ModelRegistry& registry, const InstalledModel& model) {
  if (model.demo || model.path.empty()) return "the demo model is built in";
  if (model.in_models_folder)
    return "it is in the models folder, which is always listed: move the file out, or delete it";
  const auto rec = registry.findByPath(model.path);
  if (!rec) return "it is not on the list";
  registry.remove(rec->id);
  return {};
}

std::string removeInstalledModel(AppDatabase& db, ModelRegistry& registry, const InstalledModel& model) {
  if (model.demo || model.path.empty()) return "the demo model is built in and cannot be removed";
  std::error_code ec;
  std::filesystem::remove(model.path, ec);
  if (ec) return "cannot delete " + model.path + ": " + ec.message();
  if (auto rec = registry.findByPath(model.path)) registry.remove(rec->id);
  if (!model.sha256.empty() && registry.findBySha256(model.sha256).empty()) {
    PredictorStore store(db);
    for (const PredictorSetInfo& p : store.list(model.sha256)) store.remove(model.sha256, p.distance);
  }
  return {};
}

}  // namespace moe
