#include "app/core/model_predictor.h"

#include <cmath>

#include "app/core/demo_model.h"
#include "app/core/predictor_store.h"
#include "models/sha256.h"
#include "synth/synthetic_model.h"

namespace moe {

const std::string& demoModelSha256(DemoModel kind) {
  static const std::string random = sha256Hex(synth::demoModelBytes());
  if (kind == DemoModel::kRandom) return random;
  static const std::string trained = sha256OfFile(requireTrainedDemoModel());
  return trained;
}

const std::string& demoModelSha256() { return demoModelSha256(appDemoModel()); }

std::shared_ptr<const PredictorSet> storedPredictorFor(AppDatabase& db, ModelRegistry& registry,
                                                       const std::string& model_path, int distance) {
  std::string sha;
  if (model_path.empty())
    sha = demoModelSha256();
  else if (auto m = registry.findByPath(model_path))
    sha = m->sha256;
  if (sha.empty()) return nullptr;
  auto set = PredictorStore(db).load(sha, distance);
  return set ? std::make_shared<const PredictorSet>(std::move(*set)) : nullptr;
}

std::optional<PredictorSetInfo> storedPredictorInfo(AppDatabase& db, const std::string& model_sha256,
                                                    int distance) {
  if (model_sha256.empty()) return std::nullopt;
  for (const auto& info : PredictorStore(db).list(model_sha256))
    if (info.distance == distance) return info;
  return std::nullopt;
}

std::string predictorNote(const std::optional<PredictorSetInfo>& info) {
  if (!info) return {};
  if (info->mean_accuracy < 0) return "predictor";
  return "predictor " + std::to_string(int(std::lround(info->mean_accuracy * 100))) + "%";
}

}  // namespace moe
