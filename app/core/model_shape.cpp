#include "app/core/model_shape.h"

#include "app/core/engine_session.h"
#include "inference/backend.h"
#include "offload/host_expert_store.h"

namespace moe {

ModelShape describeModel(const std::string& path, bool demo, DemoModel demo_model) {
  SessionOptions so;
  so.model_path = path;
  so.demo = demo;
  so.demo_model = demo_model;
  auto backend = makeCpuBackend(1);
  return shapeOf(*Model::load(openModelFile(so), *backend, Model::Purpose::Describe));
}

ModelShape shapeOf(const Model& model) {
  ModelShape s;
  s.config = model.config();
  s.sizes = model.sizes();
  s.host_store_bytes = HostExpertStore::bytesNeeded(model);
  return s;
}

}  // namespace moe
