// One flat description of every supported SwiGLU MoE architecture, filled only
// from GGUF metadata; architecture differences are flags, not classes.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "models/gguf.h"

namespace moe {

class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Arch { Llama, Qwen2Moe, Qwen3Moe, Deepseek, Olmoe };
enum class RopeStyle { Norm, Neox };  // Norm: adjacent pairs (llama, deepseek); Neox: halves
enum class GatingFunc { Softmax, Sigmoid };
enum class QkNorm { None, PerHead, Whole };  // qwen3moe: per head; olmoe: whole projection

const char* archName(Arch a);

struct ModelConfig {
  Arch arch = Arch::Llama;
  std::string arch_name;   // general.architecture
  std::string model_name;  // general.name (may be empty)

  int n_vocab = 0;
  int n_ctx_train = 0;
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;  // attention.key_length, else n_embd / n_head
  int n_rot = 0;     // rope.dimension_count, else head_dim
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  RopeStyle rope_style = RopeStyle::Norm;
  QkNorm qk_norm = QkNorm::None;

  int n_ff = 0;                      // dense FFN width (dense layers, deepseek leading layers)
  int n_expert = 0;                  // routed experts per MoE layer
  int n_expert_used = 0;             // experts chosen per token
  int n_ff_exp = 0;                  // one routed expert's FFN width
  int n_expert_shared = 0;           // deepseek: shared experts (fused into one FFN)
  int n_ff_shexp = 0;                // width of the shared-expert FFN (fused)
  int n_leading_dense = 0;           // deepseek: first layers are dense
  bool shared_expert_gated = false;  // qwen2moe: sigmoid(ffn_gate_inp_shexp . x)
  GatingFunc gating = GatingFunc::Softmax;
  bool norm_topk_weights = false;  // renormalise the chosen experts' weights to sum 1
  float expert_weights_scale = 1.0f;

  bool isMoeLayer(int layer) const { return n_expert > 0 && layer >= n_leading_dense; }
  int qWidth() const { return n_head * head_dim; }
  int kvWidth() const { return n_head_kv * head_dim; }

  // Throws ModelError naming the missing/invalid key or the unsupported architecture.
  static ModelConfig fromGguf(const gguf::GgufFile& file);
};

}  // namespace moe
