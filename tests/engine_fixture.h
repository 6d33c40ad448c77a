// Builds an engine over a synthetic model held in memory, for tests.
#pragma once

#include <memory>
#include <string>

#include "inference/backend.h"
#include "inference/model.h"
#include "inference/transformer.h"
#include "models/synthetic_model.h"
#include "offload/resident_expert_source.h"

struct EngineFixture {
  std::unique_ptr<moe::Backend> backend;
  std::unique_ptr<moe::Model> model;
  std::unique_ptr<moe::ResidentExpertSource> experts;

  explicit EngineFixture(const moe::synth::SyntheticSpec& spec, int threads = 2) {
    backend = moe::makeCpuBackend(threads);
    model = moe::Model::load(moe::gguf::GgufFile::fromBytes(moe::synth::buildModel(spec).toBytes()), *backend);
    experts = std::make_unique<moe::ResidentExpertSource>(model->hostExperts());
  }
  std::unique_ptr<moe::Transformer> transformer(int n_ctx = 256, moe::ExpertSource* source = nullptr) {
    return std::make_unique<moe::Transformer>(*model, *backend, source ? *source : *experts, n_ctx);
  }
};

// max |a - b| relative to max |b|.
inline double relMaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return a.size() == b.size() ? diff / scale : 1e30;
}
