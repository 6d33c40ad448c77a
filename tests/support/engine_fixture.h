// Builds an engine over a synthetic model held in memory, for tests.
#pragma once

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "inference/backend.h"
#include "inference/model.h"
#include "inference/transformer.h"
#include "offload/resident_expert_source.h"
#include "quant/quant.h"
#include "synth/synthetic_model.h"

struct EngineFixture {
  std::unique_ptr<moe::Backend> backend;
  std::unique_ptr<moe::Model> model;
  std::unique_ptr<moe::ResidentExpertSource> experts;

  explicit EngineFixture(const moe::synth::SyntheticSpec& spec, int threads = 2) {
    backend = moe::makeCpuBackend(threads);
    model =
        moe::Model::load(moe::gguf::GgufFile::fromBytes(moe::synth::buildModel(spec).toBytes()), *backend);
    experts = std::make_unique<moe::ResidentExpertSource>(model->hostExperts());
  }
  std::unique_ptr<moe::Transformer> transformer(int n_ctx = 256, moe::ExpertSource* source = nullptr) {
    return std::make_unique<moe::Transformer>(*model, *backend, source ? *source : *experts, n_ctx);
  }
};

// The GGUF bytes of `spec` with one tensor re-typed (zero bytes of the new type):
// how a file with, say, a K-quant expert tensor looks to the loader.
inline std::vector<uint8_t> withTensorRetyped(const moe::synth::SyntheticSpec& spec,
                                              const std::string& tensor, moe::gguf::TensorType type) {
  using namespace moe::gguf;
  const auto src = GgufFile::fromBytes(moe::synth::buildModel(spec).toBytes());
  GgufWriter w;
  for (const auto& kv : src.metadata())
    if (kv.key != "general.alignment") w.setValue(kv.key, kv.value);
  for (const auto& t : src.tensors()) {
    if (t.name == tensor) {
      std::vector<uint8_t> zeros(rowBytes(type, t.dims[0]) * (t.nElements() / t.dims[0]), 0);
      w.addTensor(t.name, t.dims, type, zeros);
    } else {
      const auto d = src.tensorData(t);
      w.addTensor(t.name, t.dims, t.type, std::vector<uint8_t>(d.begin(), d.end()));
    }
  }
  return w.toBytes();
}

// A tiny llama model whose blk.0 gate experts are I16, a type the engine opens but
// does not compute.
inline std::vector<uint8_t> tinyModelWithUncomputedExperts() {
  auto spec = moe::synth::tinySpec("llama");
  spec.n_embd = 256;
  spec.head_dim = 64;
  return withTensorRetyped(spec, "blk.0.ffn_gate_exps.weight", moe::gguf::TensorType::I16);
}

// n uniform floats in [lo, hi) from a seeded generator: the same inputs every run.
inline std::vector<float> randomFloats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// v with every element rounded to IEEE half (nearest even) and widened back: what an
// F16 KV cache (the CUDA backend's) holds of it.
inline std::vector<float> roundedToHalf(std::vector<float> v) {
  for (float& x : v) x = moe::quant::fp16ToFp32(moe::quant::fp32ToFp16(x));
  return v;
}

// An F32 KV cache over host memory (what the CPU backend's attention reads).
inline moe::KvCache hostKv(std::vector<float>& v) { return {v.data(), moe::KvType::F32, v.size()}; }

// max |a - b| relative to max |b|; 1e30 when a is NaN or infinite where b is finite.
inline double relMaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (!std::isfinite(a[i]) && std::isfinite(b[i])) return 1e30;  // std::max would drop a NaN
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return a.size() == b.size() ? diff / scale : 1e30;
}
