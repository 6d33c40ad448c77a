#include "app/core/engine_session.h"

#include <algorithm>

#include "models/synthetic_model.h"
#include "offload/resident_expert_source.h"

namespace moe {

gguf::GgufFile openModelFile(const SessionOptions& opts) {
  if (opts.demo) return gguf::GgufFile::fromBytes(synth::demoModelBytes());
  if (opts.model_path.empty()) throw std::invalid_argument("no model given: pass a GGUF file or --demo");
  return gguf::GgufFile::open(opts.model_path);
}

EngineSession::EngineSession(const SessionOptions& opts) : demo_(opts.demo) {
  backend_ = makeCpuBackend(opts.threads);
  model_ = Model::load(openModelFile(opts), *backend_);
  experts_ = std::make_unique<ResidentExpertSource>(model_->hostExperts());
  const int n_ctx = std::clamp(opts.n_ctx, 1, model_->config().n_ctx_train);
  transformer_ = std::make_unique<Transformer>(*model_, *backend_, *experts_, n_ctx);
  generator_ = std::make_unique<Generator>(*model_, *transformer_);
}

EngineSession::~EngineSession() = default;

}  // namespace moe
