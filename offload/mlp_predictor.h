// One layer's learned predictor: a 2-layer MLP (n_embd -> hidden -> n_expert,
// ReLU) mapping layer L's FFN input to a score per expert of layer L + distance
// (ProMoE section 4: one small predictor per layer, trained offline). And the
// predictor set: all layers of one model, one distance, with training metadata,
// as one file (what `train` writes, the store exports and imports).
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace moe {

class PredictorFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct MlpPredictor {
  static constexpr uint32_t kFormatVersion = 1;
  int layer = 0, target_layer = 0;
  int n_in = 0, n_hidden = 0, n_out = 0;
  int k = 0;                  // experts the target's gate chooses per token
  std::vector<float> w1, b1;  // [n_hidden][n_in], [n_hidden]
  std::vector<float> w2, b2;  // [n_out][n_hidden], [n_out]

  int64_t parameterCount() const { return int64_t(w1.size() + b1.size() + w2.size() + b2.size()); }
  // logits[n_out] for one input row; scratch holds n_hidden floats.
  void forward(const float* x, float* scratch, float* logits) const;

  // Blob (little-endian): "MLP1", u32 format version, u32 layer, target_layer,
  // n_in, n_hidden, n_out, k, then w1, b1, w2, b2 as f32.
  std::vector<uint8_t> toBlob() const;
  // Throws PredictorFormatError for a damaged blob or another format version.
  static MlpPredictor fromBlob(std::span<const uint8_t> blob);
};

// Top-`budget` experts by score, highest first (ties: lower id).
std::vector<int> topExperts(std::span<const float> scores, int budget);

struct PredictorSet {
  static constexpr uint32_t kFileVersion = 1;
  std::string model_sha256, model_name;
  int distance = 2;
  std::string trained_on;   // prompt source, e.g. "builtin (90 prompts)"
  int64_t token_count = 0;  // training tokens
  uint64_t seed = 0;
  std::vector<int> train_prompts, val_prompts, test_prompts;  // prompt indices of the trace
  std::vector<MlpPredictor> layers;                           // ascending by layer
  std::vector<double> val_accuracy;                           // per entry of layers

  const MlpPredictor* forLayer(int layer) const;
  std::vector<uint8_t> toBytes() const;
  static PredictorSet fromBytes(std::span<const uint8_t> bytes);  // throws PredictorFormatError
  void save(const std::string& path) const;                       // throws std::runtime_error
  static PredictorSet load(const std::string& path);
};

}  // namespace moe
