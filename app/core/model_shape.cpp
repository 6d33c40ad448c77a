#include "app/core/model_shape.h"

#include "app/core/engine_session.h"
#include "inference/backend.h"
#include "offload/host_expert_store.h"

namespace moe {

ModelShape describeModel(const std::string& path, bool demo) {
  SessionOptions so;
  so.model_path = path;
  so.demo = demo;
  auto backend = makeCpuBackend(1);
  auto model = Model::load(openModelFile(so), *backend, Model::Purpose::Describe);
  ModelShape s;
  s.config = model->config();
  s.sizes = model->sizes();
  s.host_store_bytes = HostExpertStore::bytesNeeded(*model);
  return s;
}

}  // namespace moe
