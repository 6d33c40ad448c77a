// The synthetic generator's tensor fill (synthetic_model.cpp), shared with the
// per-architecture parts that live in their own files (synthetic_qwen35.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "models/gguf.h"
#include "synth/synthetic_model.h"

namespace moe::synth::detail {

// Normal: ~N(0, sigma^2); NearOne: uniform in [0.9, 1.1] (norm weights); NearScaled: NearOne
// times sigma (gemma4's q/k norms); Decay:
// uniform in [-2.125, -0.125] (qwen35moe's ssm_a, which stores -exp(A_log) < 0).
enum class Init { Normal, NearOne, Decay, NearScaled };

struct InitSpec {
  Init kind = Init::Normal;
  double sigma = 1.0;  // Normal: standard deviation
};

// Row r (of ne0 elements) of tensor `name` from the key (seed, name, r), encoded in `type`.
std::function<void(std::span<uint8_t>)> makeFill(uint64_t seed, const std::string& name,
                                                 gguf::TensorType type, uint64_t ne0, uint64_t n_rows,
                                                 InitSpec init);

// Adds an architecture's tensors to a file being written, each filled from the spec's
// seed and the tensor's name (makeFill).
struct TensorWriter {
  const SyntheticSpec& s;
  gguf::GgufWriter& w;

  static std::string blk(int l, const char* what) { return "blk." + std::to_string(l) + "." + what; }
  void tensor(const std::string& name, std::vector<uint64_t> dims, gguf::TensorType type, InitSpec init);
  // {fan_in, fan_out, ...}: N(0, gain^2 / fan_in), as the generator's other matrices.
  void matrix(const std::string& name, std::vector<uint64_t> dims, gguf::TensorType type, double gain = 1.0);
  // Weights near one (uniform in [0.9, 1.1]).
  void norm(const std::string& name, uint64_t n);
};

// qwen35moe: layer l's attention tensors (a gated delta-net layer or a full-attention
// layer with the joint query + gate projection) and the file's qwen35moe keys.
void addQwen35Attention(const SyntheticSpec& s, gguf::GgufWriter& w, int l);
void writeQwen35Keys(const SyntheticSpec& s, gguf::GgufWriter& w);
// Whether layer l of a qwen35moe spec is a delta-net layer (the MTP layers after
// n_layer are full attention).
bool qwen35Recurrent(const SyntheticSpec& s, int l);

// gemma4: layer l's tensors (attention, the dense MLP, the experts and the norms
// around them), the file's rope_freqs, and its gemma4 keys.
void addGemma4Layer(const SyntheticSpec& s, gguf::GgufWriter& w, int l);
void addGemma4Globals(const SyntheticSpec& s, gguf::GgufWriter& w);
void writeGemma4Keys(const SyntheticSpec& s, gguf::GgufWriter& w);
// Whether layer l of a gemma4 spec is a global (not sliding) layer.
bool gemma4Global(const SyntheticSpec& s, int l);

}  // namespace moe::synth::detail
