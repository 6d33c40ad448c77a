#include "app/core/predictor_store.h"

#include <stdexcept>

#include "app/core/model_registry.h"

namespace moe {

void PredictorStore::save(const PredictorSet& set) {
  const std::string sha = normalizeSha256(set.model_sha256);
  if (sha.empty()) throw std::invalid_argument("a predictor set needs the model's sha256");
  if (set.layers.empty()) throw std::invalid_argument("the predictor set has no layers");
  const int64_t now = unixMillisNow();
  sql::Transaction tx(db_);
  db_.prepare("DELETE FROM predictors WHERE model_sha256 = ?1 AND distance = ?2")
      .bindText(1, sha)
      .bindInt64(2, set.distance)
      .run();
  auto st = db_.prepare(
      "INSERT INTO predictors (model_sha256, layer, distance, format_version, weights, trained_on, "
      "token_count, accuracy, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)");
  for (size_t i = 0; i < set.layers.size(); ++i) {
    const auto& p = set.layers[i];
    if (p.target_layer - p.layer != set.distance)
      throw std::invalid_argument("layer " + std::to_string(p.layer) +
                                  " predicts another distance than the set's");
    const auto blob = p.toBlob();
    st.reset();
    st.bindText(1, sha).bindInt64(2, p.layer).bindInt64(3, set.distance);
    st.bindInt64(4, MlpPredictor::kFormatVersion).bindBlob(5, blob).bindText(6, set.trained_on);
    st.bindInt64(7, set.token_count).bindInt64(9, now);
    const double acc = i < set.val_accuracy.size() ? set.val_accuracy[i] : -1;
    if (acc >= 0)
      st.bindDouble(8, acc);
    else
      st.bindNull(8);
    st.run();
  }
  tx.commit();
}

std::optional<PredictorSet> PredictorStore::load(const std::string& model_sha256, int distance) {
  const std::string sha = normalizeSha256(model_sha256);
  auto st = db_.prepare(
      "SELECT weights, trained_on, token_count, accuracy FROM predictors "
      "WHERE model_sha256 = ?1 AND distance = ?2 AND format_version = ?3 ORDER BY layer");
  st.bindText(1, sha).bindInt64(2, distance).bindInt64(3, MlpPredictor::kFormatVersion);
  PredictorSet set;
  set.model_sha256 = sha;
  set.distance = distance;
  while (st.step()) {
    set.layers.push_back(MlpPredictor::fromBlob(st.columnBlob(0)));
    set.trained_on = st.columnText(1);
    set.token_count = st.columnInt64(2);
    set.val_accuracy.push_back(st.isNull(3) ? -1.0 : st.columnDouble(3));
  }
  if (set.layers.empty()) return std::nullopt;
  return set;
}

std::vector<PredictorSetInfo> PredictorStore::list(const std::string& model_sha256) {
  auto st = db_.prepare(
      "SELECT distance, COUNT(*), MAX(trained_on), MAX(token_count), AVG(accuracy), MAX(created_at) "
      "FROM predictors WHERE model_sha256 = ?1 AND format_version = ?2 GROUP BY distance ORDER BY distance");
  st.bindText(1, normalizeSha256(model_sha256)).bindInt64(2, MlpPredictor::kFormatVersion);
  std::vector<PredictorSetInfo> out;
  while (st.step()) {
    PredictorSetInfo i;
    i.model_sha256 = normalizeSha256(model_sha256);
    i.distance = int(st.columnInt64(0));
    i.layers = int(st.columnInt64(1));
    i.trained_on = st.columnText(2);
    i.token_count = st.columnInt64(3);
    i.mean_accuracy = st.isNull(4) ? -1 : st.columnDouble(4);
    i.created_at = st.columnInt64(5);
    out.push_back(i);
  }
  return out;
}

int PredictorStore::remove(const std::string& model_sha256, int distance) {
  db_.prepare("DELETE FROM predictors WHERE model_sha256 = ?1 AND distance = ?2")
      .bindText(1, normalizeSha256(model_sha256))
      .bindInt64(2, distance)
      .run();
  return int(db_.changes());
}

void PredictorStore::exportSet(const std::string& model_sha256, int distance, const std::string& path) {
  auto set = load(model_sha256, distance);
  if (!set)
    throw std::runtime_error("no predictor of distance " + std::to_string(distance) +
                             " is stored for model " + model_sha256.substr(0, 12));
  set->save(path);
}

PredictorSet PredictorStore::importSet(const std::string& path) {
  PredictorSet set = PredictorSet::load(path);
  save(set);
  return set;
}

}  // namespace moe
