#include "app/core/model_predictor.h"

#include "app/core/predictor_store.h"
#include "models/synthetic_model.h"
#include "offload/trainer/sha256.h"

namespace moe {

const std::string& demoModelSha256() {
  static const std::string sha = sha256Hex(synth::demoModelBytes());
  return sha;
}

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

}  // namespace moe
