#include "inference/model.h"

#include <cmath>
#include <string>

#include "quant/quant.h"

namespace moe {
namespace {

std::string dimsText(const gguf::TensorInfo& t) {
  std::string s = "{";
  for (size_t i = 0; i < t.dims.size(); ++i) s += (i ? ", " : "") + std::to_string(t.dims[i]);
  return s + "}";
}

std::string expectText(const std::vector<uint64_t>& dims) {
  std::string s = "{";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "}";
}

std::string computeTypeList() {
  std::string s;
  for (gguf::TensorType t : quant::kComputeTypes)
    s += (s.empty() ? "" : ", ") + std::string(gguf::tensorTypeName(t));
  return s;
}

}  // namespace

// Looks tensors up by name, checks their shapes and types against the config,
// and turns them into views / backend vectors.
class Model::Loader {
 public:
  Loader(Model& m, bool for_running) : m_(m), f_(m.file_), c_(m.config_), for_running_(for_running) {}

  void run() {
    auto& w = m_.weights_;
    const uint64_t E = c_.n_embd;
    w.token_embd = matrix("token_embd.weight", {E, 0});
    if (c_.n_vocab == 0) c_.n_vocab = static_cast<int>(w.token_embd.rows);
    if (w.token_embd.rows != c_.n_vocab)
      throw ModelError("token_embd.weight has " + std::to_string(w.token_embd.rows) +
                       " rows but the vocabulary has " + std::to_string(c_.n_vocab) + " tokens");
    w.output_norm = vector("output_norm.weight", E);
    if (f_.findTensor("output.weight")) {
      w.output = matrix("output.weight", {E, uint64_t(c_.n_vocab)});
    } else {
      w.output = w.token_embd;  // tied output projection (GGUF-NOTES.md)
      w.output_tied = true;
    }
    // GLM-4.5 (355B) normalises q and k per head, GLM-4.5-Air does not: the file tells.
    if (c_.arch == Arch::Glm4Moe && f_.findTensor("blk.0.attn_q_norm.weight")) c_.qk_norm = QkNorm::PerHead;
    m_.host_experts_.resize(c_.n_layer);
    m_.host_routers_.resize(c_.n_layer);
    m_.host_expert_biases_.resize(c_.n_layer);
    if (c_.isGemma4() && f_.findTensor("rope_freqs.weight")) {
      // One tensor for every global layer (llama.cpp loads it per layer as a duplicate).
      int global = -1;
      for (int il = 0; il < c_.n_layer && global < 0; ++il)
        if (!c_.swa[size_t(il)]) global = il;
      if (global >= 0) w.rope_freqs = hostVector("rope_freqs.weight", uint64_t(c_.nRotOf(global) / 2));
    }
    for (int il = 0; il < c_.n_layer; ++il) w.layers.push_back(c_.isGemma4() ? gemma4Layer(il) : layer(il));
    m_.sizes_.other_bytes = countedBytes_;
  }

 private:
  std::string blk(int il, const char* name) const { return "blk." + std::to_string(il) + "." + name; }

  const gguf::TensorInfo& find(const std::string& name) const {
    const auto* t = f_.findTensor(name);
    if (!t) throw ModelError("model file lacks tensor '" + name + "' required by " + c_.arch_name);
    return *t;
  }

  // A 2-D weight with dims {cols, rows}; a 0 in `want` means "any".
  WeightView matrix(const std::string& name, std::vector<uint64_t> want) { return view(find(name), want); }
  WeightView optionalMatrix(const std::string& name, std::vector<uint64_t> want) {
    const auto* t = f_.findTensor(name);
    return t ? view(*t, want) : WeightView{};
  }

  WeightView view(const gguf::TensorInfo& t, const std::vector<uint64_t>& want) {
    checkDims(t, want);
    checkComputable(t);
    countedBytes_ += t.nbytes;
    // A model loaded to be described never runs: its weights stay where the file has
    // them (no upload, no repacking: that took 38 s and 8.9 GB for a 235B model's
    // 4.7 GB of Q4_0 attention weights).
    if (!for_running_) return fileView(t);
    return m_.backend_.prepareWeight(fileView(t));
  }

  // The tensor where it lies in the file (host memory).
  WeightView fileView(const gguf::TensorInfo& t) const {
    WeightView v;
    v.type = t.type;
    v.data = f_.tensorData(t).data();
    v.cols = static_cast<int64_t>(t.ne(0));
    v.rows = static_cast<int64_t>(t.nElements() / t.ne(0));
    v.row_bytes = t.rowBytes();
    return v;
  }

  void checkDims(const gguf::TensorInfo& t, const std::vector<uint64_t>& want) const {
    bool ok = t.dims.size() == want.size();
    for (size_t i = 0; ok && i < want.size(); ++i) ok = want[i] == 0 || want[i] == t.dims[i];
    if (!ok)
      throw ModelError("tensor '" + t.name + "' has shape " + dimsText(t) + ", expected " + expectText(want) +
                       " for this " + c_.arch_name + " configuration");
  }

  void checkComputable(const gguf::TensorInfo& t, bool always = false) const {
    if ((for_running_ || always) && !quant::isComputeSupported(t.type))
      throw ModelError("tensor '" + t.name + "' has type " + gguf::tensorTypeName(t.type) +
                       ", which moechat cannot compute yet (supported: " + computeTypeList() + ")");
  }

  // A 1-D tensor of `n` elements, converted to F32 in backend memory.
  const float* vector(const std::string& name, uint64_t n) { return toBackend(find(name), n); }
  const float* optionalVector(const std::string& name, uint64_t n) {
    const auto* t = f_.findTensor(name);
    return t ? toBackend(*t, n) : nullptr;
  }

  // A 1-D tensor of `n` elements as F32 on the host (what the host's routing reads).
  std::vector<float> hostVector(const std::string& name, uint64_t n) {
    const auto& t = find(name);
    if (t.nElements() != n || t.dims.size() != 1)
      throw ModelError("tensor '" + t.name + "' has shape " + dimsText(t) + ", expected {" +
                       std::to_string(n) + "}");
    checkComputable(t, /*always=*/true);
    countedBytes_ += t.nbytes;
    std::vector<float> host(n);
    quant::dequantizeRow(t.type, f_.tensorData(t).data(), host.data(), static_cast<int64_t>(n));
    return host;
  }

  // Every element of a small tensor (already checked) as F32 in host memory the model keeps.
  const float* hostCopy(const std::string& name) {
    const auto& t = find(name);
    std::vector<float> host(t.nElements());
    quant::dequantizeRow(t.type, f_.tensorData(t).data(), host.data(), static_cast<int64_t>(host.size()));
    m_.owned_host_.push_back(std::move(host));
    return m_.owned_host_.back().data();
  }

  // A small tensor of the given shape as F32 in backend memory, rows one after another.
  const float* vectorOfShape(const std::string& name, const std::vector<uint64_t>& dims) {
    const auto& t = find(name);
    checkDims(t, dims);
    return toBackend(t, t.nElements(), /*any_shape=*/true);
  }

  const float* toBackend(const gguf::TensorInfo& t, uint64_t n, bool any_shape = false) {
    if (t.nElements() != n || (t.dims.size() != 1 && !any_shape))
      throw ModelError("tensor '" + t.name + "' has shape " + dimsText(t) + ", expected {" +
                       std::to_string(n) + "}");
    checkComputable(t, /*always=*/true);  // converted to F32 right here
    countedBytes_ += t.nbytes;
    std::vector<float> host(n);
    quant::dequantizeRow(t.type, f_.tensorData(t).data(), host.data(), static_cast<int64_t>(n));
    float* dev = m_.backend_.allocFloats(n);
    m_.backend_.fromHost(dev, host.data(), n);
    m_.owned_vectors_.push_back(dev);
    return dev;
  }

  LayerWeights layer(int il) {
    LayerWeights L;
    const uint64_t E = c_.n_embd, Q = c_.qWidth(), KV = c_.kvWidth();
    L.attn_norm = vector(blk(il, "attn_norm.weight"), E);
    attention(il, L);
    // glm4moe and gpt-oss name the FFN's input norm after its place (HF post_attention_layernorm).
    const bool post_attention_name =
        c_.arch == Arch::Glm4Moe || c_.arch == Arch::GptOss || c_.arch == Arch::Qwen35Moe;
    L.ffn_norm = vector(blk(il, post_attention_name ? "post_attention_norm.weight" : "ffn_norm.weight"), E);
    if (c_.isRecurrentLayer(il)) {
      // no query or key
    } else if (c_.qk_norm == QkNorm::PerHead) {
      L.q_norm = vector(blk(il, "attn_q_norm.weight"), c_.head_dim);
      L.k_norm = vector(blk(il, "attn_k_norm.weight"), c_.head_dim);
    } else if (c_.qk_norm == QkNorm::Whole) {
      L.q_norm = vector(blk(il, "attn_q_norm.weight"), Q);
      L.k_norm = vector(blk(il, "attn_k_norm.weight"), KV);
    }
    if (!c_.isMoeLayer(il)) {
      const uint64_t F = c_.n_ff;
      L.ffn_gate = matrix(blk(il, "ffn_gate.weight"), {E, F});
      L.ffn_up = matrix(blk(il, "ffn_up.weight"), {E, F});
      L.ffn_down = matrix(blk(il, "ffn_down.weight"), {F, E});
      return L;
    }
    L.router = matrix(blk(il, "ffn_gate_inp.weight"), {E, uint64_t(c_.n_expert)});
    m_.host_routers_[il] = fileView(find(blk(il, "ffn_gate_inp.weight")));
    L.router_bias = optionalVector(blk(il, "ffn_gate_inp.bias"), uint64_t(c_.n_expert));
    if (c_.expert_biases) {
      const uint64_t F = c_.n_ff_exp, N = c_.n_expert;
      L.exp_gate_bias = vectorOfShape(blk(il, "ffn_gate_exps.bias"), {F, N});
      L.exp_up_bias = vectorOfShape(blk(il, "ffn_up_exps.bias"), {F, N});
      L.exp_down_bias = vectorOfShape(blk(il, "ffn_down_exps.bias"), {E, N});
      Model::ExpertBiases& host = m_.host_expert_biases_[il];
      const bool on_host = m_.backend_.device() == Device::kCpu;
      host.gate = on_host ? L.exp_gate_bias : hostCopy(blk(il, "ffn_gate_exps.bias"));
      host.up = on_host ? L.exp_up_bias : hostCopy(blk(il, "ffn_up_exps.bias"));
      host.down = on_host ? L.exp_down_bias : hostCopy(blk(il, "ffn_down_exps.bias"));
    }
    // minimax-m2's loader requires the selection bias (llama.cpp src/models/minimax-m2.cpp).
    if (c_.arch == Arch::Glm4Moe || c_.arch == Arch::MinimaxM2 ||
        (c_.arch == Arch::Deepseek2 && f_.findTensor(blk(il, "exp_probs_b.bias"))))
      L.expert_bias = hostVector(blk(il, "exp_probs_b.bias"), uint64_t(c_.n_expert));
    if (c_.n_ff_shexp > 0) {
      const uint64_t S = c_.n_ff_shexp;
      L.shexp_gate = matrix(blk(il, "ffn_gate_shexp.weight"), {E, S});
      L.shexp_up = matrix(blk(il, "ffn_up_shexp.weight"), {E, S});
      L.shexp_down = matrix(blk(il, "ffn_down_shexp.weight"), {S, E});
      if (c_.shared_expert_gated) L.shexp_router = matrix(blk(il, "ffn_gate_inp_shexp.weight"), {E});
    }
    experts(il);
    return L;
  }

  // gemma4 (llama.cpp src/models/gemma4.cpp load_arch_tensors; names from
  // gguf-py constants.py): per-head q/k norms of the layer's head size, a V projection
  // only where the layer has one (else V = K), no K either in a shared-KV layer; the
  // dense MLP beside the experts with its norms; the router's input scale and each
  // expert's output scale; the experts as one ffn_gate_up_exps (gate rows, then up
  // rows) or ffn_gate_exps + ffn_up_exps.
  LayerWeights gemma4Layer(int il) {
    LayerWeights L;
    const uint64_t E = c_.n_embd, hd = c_.headDimOf(il), Q = uint64_t(c_.n_head) * hd, KV = c_.kvWidthOf(il);
    const uint64_t F = c_.n_ff;
    L.attn_norm = vector(blk(il, "attn_norm.weight"), E);
    L.wq = matrix(blk(il, "attn_q.weight"), {E, Q});
    L.q_norm = vector(blk(il, "attn_q_norm.weight"), hd);
    if (c_.ownsKv(il)) {
      L.wk = matrix(blk(il, "attn_k.weight"), {E, KV});
      L.wv = optionalMatrix(blk(il, "attn_v.weight"), {E, KV});
      L.k_norm = vector(blk(il, "attn_k_norm.weight"), hd);
    }
    L.wo = matrix(blk(il, "attn_output.weight"), {Q, E});
    L.attn_post_norm = vector(blk(il, "post_attention_norm.weight"), E);
    if (f_.findTensor(blk(il, "layer_output_scale.weight")))
      L.out_scale = hostVector(blk(il, "layer_output_scale.weight"), 1)[0];
    L.ffn_norm = vector(blk(il, "ffn_norm.weight"), E);
    L.ffn_gate = matrix(blk(il, "ffn_gate.weight"), {E, F});
    L.ffn_up = matrix(blk(il, "ffn_up.weight"), {E, F});
    L.ffn_down = matrix(blk(il, "ffn_down.weight"), {F, E});
    L.ffn_post_norm = vector(blk(il, "post_ffw_norm.weight"), E);
    L.router = matrix(blk(il, "ffn_gate_inp.weight"), {E, uint64_t(c_.n_expert)});
    m_.host_routers_[il] = fileView(find(blk(il, "ffn_gate_inp.weight")));
    std::vector<float> router_scale = hostVector(blk(il, "ffn_gate_inp.scale"), E);
    for (float& v : router_scale) v /= std::sqrt(float(E));
    L.router_in_norm = ownVector(router_scale);
    L.ffn_pre_norm_2 = vector(blk(il, "pre_ffw_norm_2.weight"), E);
    L.ffn_post_norm_1 = vector(blk(il, "post_ffw_norm_1.weight"), E);
    L.ffn_post_norm_2 = vector(blk(il, "post_ffw_norm_2.weight"), E);
    L.expert_out_scale = hostVector(blk(il, "ffn_down_exps.scale"), uint64_t(c_.n_expert));
    L.expert_out_scale_dev = ownVector(L.expert_out_scale);
    experts(il);
    return L;
  }

  // Host values as F32 in backend memory the model owns.
  const float* ownVector(const std::vector<float>& host) {
    float* dev = m_.backend_.allocFloats(host.size());
    m_.backend_.fromHost(dev, host.data(), host.size());
    m_.owned_vectors_.push_back(dev);
    return dev;
  }

  // q/k/v as three tensors or one fused attn_qkv (rows q, then k, then v).
  // qwen35moe's full-attention layers: attn_q holds per head [q; gate], twice Q rows.
  void attention(int il, LayerWeights& L) {
    if (c_.isMla()) return latentAttention(il, L);
    if (c_.isRecurrentLayer(il)) return deltaNet(il, L);
    const uint64_t E = c_.n_embd, Q = c_.qWidth(), KV = c_.kvWidth();
    const uint64_t QR = c_.attn_output_gate ? 2 * Q : Q;  // rows of the query projection
    if (const auto* fused = f_.findTensor(blk(il, "attn_qkv.weight"))) {
      WeightView qkv = view(*fused, {E, QR + 2 * KV});
      L.wq = rowSlice(qkv, 0, QR);
      L.wk = rowSlice(qkv, QR, KV);
      L.wv = rowSlice(qkv, QR + KV, KV);
      if (const float* b = optionalVector(blk(il, "attn_qkv.bias"), Q + 2 * KV)) {
        L.bq = b;
        L.bk = b + Q;
        L.bv = b + Q + KV;
      }
    } else {
      L.wq = matrix(blk(il, "attn_q.weight"), {E, QR});
      L.wk = matrix(blk(il, "attn_k.weight"), {E, KV});
      L.wv = matrix(blk(il, "attn_v.weight"), {E, KV});
      L.bq = optionalVector(blk(il, "attn_q.bias"), Q);
      L.bk = optionalVector(blk(il, "attn_k.bias"), KV);
      L.bv = optionalVector(blk(il, "attn_v.bias"), KV);
    }
    L.wo = matrix(blk(il, "attn_output.weight"), {Q, E});
    L.bo = optionalVector(blk(il, "attn_output.bias"), E);
    if (c_.arch == Arch::GptOss) L.attn_sinks = vector(blk(il, "attn_sinks.weight"), uint64_t(c_.n_head));
  }

  // qwen35moe's gated delta-net layer (shapes: llama.cpp's qwen35moe loader).
  void deltaNet(int il, LayerWeights& L) {
    const DeltaNetShape& d = c_.delta;
    const uint64_t E = c_.n_embd, C = d.convChannels(), V = d.valueWidth(), NV = d.n_v_heads;
    L.dn_qkv = matrix(blk(il, "attn_qkv.weight"), {E, C});
    L.dn_gate = matrix(blk(il, "attn_gate.weight"), {E, V});
    L.dn_alpha = matrix(blk(il, "ssm_alpha.weight"), {E, NV});
    L.dn_beta = matrix(blk(il, "ssm_beta.weight"), {E, NV});
    L.dn_out = matrix(blk(il, "ssm_out.weight"), {V, E});
    L.dn_conv = vectorOfShape(blk(il, "ssm_conv1d.weight"), {uint64_t(d.conv_kernel), C});
    L.dn_dt_bias = vectorOfShape(blk(il, "ssm_dt.bias"), {NV});
    L.dn_a = vectorOfShape(blk(il, "ssm_a"), {NV});
    L.dn_norm = vectorOfShape(blk(il, "ssm_norm.weight"), {uint64_t(d.head_v)});
  }

  // deepseek2: the query path (direct, or through q_lora), the latent projection and
  // its norm, each head's W_UK^T and W_UV as F32 (from attn_k_b / attn_v_b, or cut
  // out of the older files' attn_kv_b), the output projection.
  void latentAttention(int il, LayerWeights& L) {
    const MlaShape& m = c_.mla;
    const uint64_t E = c_.n_embd, H = c_.n_head, R = c_.n_rot, C = m.kv_lora, N = m.qk_nope, V = m.v_dim;
    const uint64_t Q = H * m.qk_dim;
    if (m.q_lora > 0) {
      L.wq_a = matrix(blk(il, "attn_q_a.weight"), {E, uint64_t(m.q_lora)});
      L.q_a_norm = vector(blk(il, "attn_q_a_norm.weight"), uint64_t(m.q_lora));
      L.wq_b = matrix(blk(il, "attn_q_b.weight"), {uint64_t(m.q_lora), Q});
    } else {
      L.wq = matrix(blk(il, "attn_q.weight"), {E, Q});
    }
    L.wkv_a = matrix(blk(il, "attn_kv_a_mqa.weight"), {E, C + R});
    L.kv_a_norm = vector(blk(il, "attn_kv_a_norm.weight"), C);
    L.wo = matrix(blk(il, "attn_output.weight"), {H * V, E});
    const bool split = f_.findTensor(blk(il, "attn_k_b.weight")) != nullptr;
    if (!for_running_) {  // described only: shapes and bytes, no F32 copies
      if (split) {
        describeOnly(find(blk(il, "attn_k_b.weight")), {N, C, H});
        describeOnly(find(blk(il, "attn_v_b.weight")), {C, V, H});
      } else {
        describeOnly(find(blk(il, "attn_kv_b.weight")), {C, H * (N + V)});
      }
      return;
    }
    // The shapes first: the F32 arrays are sized from header values, which only the
    // file's tensors vouch for.
    if (split) {
      checkDims(find(blk(il, "attn_k_b.weight")), {N, C, H});
      checkDims(find(blk(il, "attn_v_b.weight")), {C, V, H});
    } else {
      checkDims(find(blk(il, "attn_kv_b.weight")), {C, H * (N + V)});
    }
    std::vector<float> uk_t(H * C * N), uv(H * V * C);  // [head][kv_lora][nope], [head][v][kv_lora]
    if (split) {
      // llama.cpp's MLA layout: attn_k_b {nope, kv_lora, head} is W_UK^T per head,
      // attn_v_b {kv_lora, v, head} is W_UV per head: the F32 arrays, row for row.
      dequantizeAll(find(blk(il, "attn_k_b.weight")), {N, C, H}, uk_t.data());
      dequantizeAll(find(blk(il, "attn_v_b.weight")), {C, V, H}, uv.data());
    } else {
      // attn_kv_b {kv_lora, head * (nope + v)}: per head nope rows of W_UK, then v of W_UV.
      std::vector<float> kv_b(H * (N + V) * C);
      dequantizeAll(find(blk(il, "attn_kv_b.weight")), {C, H * (N + V)}, kv_b.data());
      for (uint64_t h = 0; h < H; ++h) {
        const float* head = kv_b.data() + h * (N + V) * C;
        for (uint64_t d = 0; d < N; ++d)
          for (uint64_t r = 0; r < C; ++r) uk_t[(h * C + r) * N + d] = head[d * C + r];
        std::copy(head + N * C, head + (N + V) * C, uv.data() + h * V * C);
      }
    }
    L.mla_uk_t = perHeadF32(std::move(uk_t), H, C, N);
    L.mla_uv = perHeadF32(std::move(uv), H, V, C);
  }

  void describeOnly(const gguf::TensorInfo& t, const std::vector<uint64_t>& dims) {
    checkDims(t, dims);
    countedBytes_ += t.nbytes;
  }

  // Every element of t (of shape `dims`) as F32 into out, in file order.
  void dequantizeAll(const gguf::TensorInfo& t, const std::vector<uint64_t>& dims, float* out) {
    checkDims(t, dims);
    checkComputable(t, /*always=*/true);
    countedBytes_ += t.nbytes;
    const auto data = f_.tensorData(t);
    const uint64_t cols = t.ne(0), rows = t.nElements() / cols;
    for (uint64_t r = 0; r < rows; ++r)
      quant::dequantizeRow(t.type, data.data() + r * t.rowBytes(), out + r * cols,
                           static_cast<int64_t>(cols));
  }

  // heads matrices of rows x cols F32 values, kept by the model, as prepared views.
  std::vector<WeightView> perHeadF32(std::vector<float> values, uint64_t heads, uint64_t rows,
                                     uint64_t cols) {
    m_.owned_host_.push_back(std::move(values));
    const float* base = m_.owned_host_.back().data();
    std::vector<WeightView> out;
    for (uint64_t h = 0; h < heads; ++h) {
      WeightView v;
      v.type = gguf::TensorType::F32;
      v.data = reinterpret_cast<const uint8_t*>(base + h * rows * cols);
      v.cols = static_cast<int64_t>(cols);
      v.rows = static_cast<int64_t>(rows);
      v.row_bytes = cols * sizeof(float);
      out.push_back(for_running_ ? m_.backend_.prepareWeight(v) : v);
    }
    return out;
  }

  static WeightView rowSlice(const WeightView& w, uint64_t first, uint64_t count) {
    return sliceRows(w, static_cast<int64_t>(first), static_cast<int64_t>(count));
  }

  // Routed experts: stacked 3-D tensors {in, out, n_expert} (expert e = byte range
  // [e*nb2, (e+1)*nb2)), or very old Mixtral files' one 2-D tensor per expert.
  void experts(int il) {
    const uint64_t E = c_.n_embd, F = c_.n_ff_exp, N = c_.n_expert;
    auto& table = m_.host_experts_[il];
    table.resize(N);
    if (const auto* fused = f_.findTensor(blk(il, "ffn_gate_up_exps.weight")); fused && c_.isGemma4()) {
      // {n_embd, 2 n_ff_exp, n_expert}: expert e's gate rows, then its up rows (llama.cpp's
      // build_moe_ffn views the product's first n_ff values as gate, the next as up).
      checkDims(*fused, {E, 2 * F, N});
      checkComputable(*fused);
      const auto data = f_.tensorData(*fused);
      const uint64_t per_expert = fused->nbytes / N;
      for (uint64_t e = 0; e < N; ++e)
        for (int part = 0; part < 2; ++part) {
          WeightView v;
          v.type = fused->type;
          v.data = data.data() + e * per_expert + uint64_t(part) * F * fused->rowBytes();
          v.cols = static_cast<int64_t>(E);
          v.rows = static_cast<int64_t>(F);
          v.row_bytes = fused->rowBytes();
          (part == 0 ? table[e].gate : table[e].up) = v;
        }
      m_.sizes_.routed_expert_bytes += fused->nbytes;
      const auto& down = find(blk(il, "ffn_down_exps.weight"));
      checkDims(down, {F, E, N});
      checkComputable(down);
      const auto down_data = f_.tensorData(down);
      for (uint64_t e = 0; e < N; ++e) {
        WeightView v;
        v.type = down.type;
        v.data = down_data.data() + e * (down.nbytes / N);
        v.cols = static_cast<int64_t>(F);
        v.rows = static_cast<int64_t>(E);
        v.row_bytes = down.rowBytes();
        table[e].down = v;
      }
      m_.sizes_.routed_expert_bytes += down.nbytes;
    } else if (f_.findTensor(blk(il, "ffn_gate_exps.weight"))) {
      const char* names[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
      const std::vector<uint64_t> shapes[3] = {{E, F, N}, {E, F, N}, {F, E, N}};
      for (int m = 0; m < 3; ++m) {
        const auto& t = find(blk(il, names[m]));
        checkDims(t, shapes[m]);
        checkComputable(t);
        const auto data = f_.tensorData(t);
        const uint64_t per_expert = t.nbytes / N;
        for (uint64_t e = 0; e < N; ++e) {
          WeightView v;
          v.type = t.type;
          v.data = data.data() + e * per_expert;
          v.cols = static_cast<int64_t>(t.dims[0]);
          v.rows = static_cast<int64_t>(t.dims[1]);
          v.row_bytes = t.rowBytes();
          (m == 0 ? table[e].gate : m == 1 ? table[e].up : table[e].down) = v;
        }
        m_.sizes_.routed_expert_bytes += t.nbytes;
      }
    } else {
      for (uint64_t e = 0; e < N; ++e) {
        const std::string idx = "." + std::to_string(e) + ".weight";
        table[e].gate = hostMatrix(blk(il, ("ffn_gate" + idx).c_str()), {E, F});
        table[e].up = hostMatrix(blk(il, ("ffn_up" + idx).c_str()), {E, F});
        table[e].down = hostMatrix(blk(il, ("ffn_down" + idx).c_str()), {F, E});
      }
    }
    m_.sizes_.expert_bytes = table[0].gate.bytes() + table[0].up.bytes() + table[0].down.bytes();
    m_.sizes_.moe_layers++;
  }

  // An expert matrix stays in the file (host memory): the expert source owns where it goes.
  WeightView hostMatrix(const std::string& name, std::vector<uint64_t> want) {
    const auto& t = find(name);
    checkDims(t, want);
    checkComputable(t);
    m_.sizes_.routed_expert_bytes += t.nbytes;
    WeightView v;
    v.type = t.type;
    v.data = f_.tensorData(t).data();
    v.cols = static_cast<int64_t>(t.dims[0]);
    v.rows = static_cast<int64_t>(t.dims[1]);
    v.row_bytes = t.rowBytes();
    return v;
  }

  Model& m_;
  const gguf::GgufFile& f_;
  ModelConfig& c_;
  uint64_t countedBytes_ = 0;
  bool for_running_;  // Purpose::Run: every tensor computable, weights prepared for the backend
};

Model::Model(gguf::GgufFile file, Backend& backend) : file_(std::move(file)), backend_(backend) {}

Model::~Model() {
  for (float* p : owned_vectors_) backend_.freeFloats(p);
}

std::unique_ptr<Model> Model::load(gguf::GgufFile file, Backend& backend, Purpose purpose) {
  std::unique_ptr<Model> m(new Model(std::move(file), backend));
  m->config_ = ModelConfig::fromGguf(m->file_);
  m->tokenizer_ = Tokenizer::fromGguf(m->file_);  // same token list as config_.n_vocab
  Loader(*m, purpose == Purpose::Run).run();
  m->chat_family_ = chatFamilyFor(m->file_);
  return m;
}

bool Model::isSynthetic() const { return file_.getBool("moechat.synthetic").value_or(false); }

}  // namespace moe
