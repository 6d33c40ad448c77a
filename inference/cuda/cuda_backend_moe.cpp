// CudaBackend: the routed experts of a MoE layer on the device (routing, the
// experts of a call, the rank-ordered combine) and the shared-expert gate.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "inference/cuda/cuda_backend.h"
#include "inference/cuda/cuda_backend_internal.h"
#include "inference/cuda/cuda_check.h"
#include "inference/cuda/cuda_kernels.h"
#include "inference/routing.h"

namespace moe {

using gguf::TensorType;
using namespace cuda_backend;

void CudaBackend::sigmoidGatedAdd(float* y, const float* x, const float* gate_logits, int n_rows, int width) {
  cuda::launchSigmoidGatedAdd(y, x, gate_logits, n_rows, width, stream_);
}

// The device copy of a layer's selection bias, uploaded on first use and again
// whenever the host values at that address differ from what was uploaded.
const float* CudaBackend::deviceSelectionBias(const float* host, int n) {
  SelectionBias& b = selection_biases_[host];
  if (!b.device || b.values.size() != size_t(n) || !std::equal(b.values.begin(), b.values.end(), host)) {
    if (!b.device || b.values.size() != size_t(n)) {
      if (b.device) freeFloats(b.device);
      b.device = nullptr;
      b.device = allocFloats(size_t(n));
    }
    b.values.assign(host, host + n);
    fromHost(b.device, b.values.data(), size_t(n));
  }
  return b.device;
}

void CudaBackend::routeTopK(const float* logits, int n_tokens, const RoutingRule& rule, float* routing,
                            int32_t* host_ids, float* host_weights) {
  if (n_tokens <= 0) return;
  if (rule.k <= 0 || rule.k > rule.n_expert)
    throw std::invalid_argument("cuda backend: routeTopK: " + std::to_string(rule.k) + " of " +
                                std::to_string(rule.n_expert) + " experts");
  const size_t n = static_cast<size_t>(n_tokens) * rule.k;
  auto* ids = reinterpret_cast<int*>(routing);
  if (rule.n_expert <= cuda::kMaxRouteExperts && rule.k <= cuda::kMaxRouteK &&
      (!rule.groupLimited() || (rule.groups <= cuda::kMaxRouteGroups && rule.n_expert % rule.groups == 0))) {
    const float* bias =
        rule.selection_bias ? deviceSelectionBias(rule.selection_bias, rule.n_expert) : nullptr;
    cuda::launchRouteTopK(logits, bias, n_tokens, rule.n_expert, rule.k, rule.gating == GatingFunc::Softmax,
                          rule.norm_topk, rule.scale, rule.groupLimited() ? rule.groups : 0, rule.group_used,
                          ids, routing + n, stream_);
    // ids and weights are adjacent: one read back of both.
    if (!host_ids && !host_weights) return;  // the MoE kernels read them on the device
    std::vector<int32_t> both(2 * n);
    readBack(both.data(), routing, both.size() * sizeof(int32_t));
    std::memcpy(host_ids, both.data(), n * sizeof(int32_t));
    std::memcpy(host_weights, both.data() + n, n * sizeof(float));
    return;
  }
  // A router wider than the kernel's shared memory (or groups it does not take):
  // routed on the host, the same rule.
  std::vector<float> host_logits(static_cast<size_t>(n_tokens) * rule.n_expert);
  toHost(host_logits.data(), logits, host_logits.size());
  std::vector<int32_t> ids_here(host_ids ? 0 : n);
  std::vector<float> weights_here(host_weights ? 0 : n);
  if (!host_ids) host_ids = ids_here.data();
  if (!host_weights) host_weights = weights_here.data();
  for (int t = 0; t < n_tokens; ++t)
    routeToken(&host_logits[size_t(t) * rule.n_expert], rule, host_ids + size_t(t) * rule.k,
               host_weights + size_t(t) * rule.k);
  static_assert(sizeof(int32_t) == sizeof(float));
  fromHost(routing, reinterpret_cast<const float*>(host_ids), n);
  fromHost(routing + n, host_weights, n);
}

size_t CudaBackend::moePlanBytes(int n_expert, int n_slots) const {
  const int columns = std::max(cuda::kMaxCallExperts, cuda::moeRoutedColumns(n_expert, n_slots));
  return sizeof(int) * static_cast<size_t>(cuda::moePlanInts(columns, n_slots));
}

// The layer's expert pointers in device memory (reserved by reserveScratch),
// uploaded when they differ from what the table holds.
cuda::LayerExperts CudaBackend::deviceLayerExperts(int layer, std::span<const ExpertWeights> experts) {
  const int n_expert = static_cast<int>(experts.size());
  if (layer < 0) throw std::invalid_argument("cuda backend: a MoE call on every expert names no layer");
  const size_t per_layer = 3 * size_t(n_expert);
  if (n_expert != layer_experts_width_ || (size_t(layer) + 1) * per_layer > layer_experts_host_.size()) {
    // Not reserved for this shape (reserveScratch takes it before a session starts).
    const size_t layers = std::max<size_t>(
        size_t(layer) + 1, layer_experts_width_ == n_expert ? layer_experts_host_.size() / per_layer : 0);
    scratch(layer_experts_, sizeof(uint8_t*) * per_layer * layers, "MoE expert tables");
    layer_experts_host_.assign(per_layer * layers, nullptr);
    layer_experts_width_ = n_expert;
  }
  const uint8_t** host = layer_experts_host_.data() + size_t(layer) * per_layer;
  bool same = true;
  for (int e = 0; e < n_expert; ++e) {
    const ExpertWeights& w = experts[size_t(e)];
    same = same && host[e] == w.gate.data && host[n_expert + e] == w.up.data &&
           host[2 * n_expert + e] == w.down.data;
    host[e] = w.gate.data;
    host[n_expert + e] = w.up.data;
    host[2 * n_expert + e] = w.down.data;
  }
  auto* device = static_cast<const uint8_t**>(layer_experts_.ptr) + size_t(layer) * per_layer;
  if (!same) upload(device, host, per_layer * sizeof(uint8_t*), "MoE expert table upload");
  return {device, device + n_expert, device + 2 * n_expert, n_expert};
}

// Consecutive experts of the same weight types, at most kMaxCallExperts, go to
// the device as one table: one set of launches each.
void CudaBackend::moeExperts(const MoeExpertsCall& c) {
  if ((c.experts.empty() && c.layer_experts.empty()) || c.n_tokens <= 0) return;
  const int n_slots = c.n_tokens * c.k;
  cuda::MoeLaunch m;
  m.n_embd = c.n_embd;
  m.n_ff = c.n_ff;
  m.n_tokens = c.n_tokens;
  m.k = c.k;
  m.n_slots = n_slots;
  m.x = c.x;
  m.ids = reinterpret_cast<const int*>(c.routing);
  m.h = c.h;
  m.outputs = c.outputs;
  m.act = cuda::Activation{c.clamped_swiglu, c.swiglu_alpha, c.swiglu_limit, c.gelu};
  m.gate_bias = c.gate_bias;
  m.up_bias = c.up_bias;
  m.down_bias = c.down_bias;
  m.x_act = scratch(moe_x_act_, cuda::quantizedActBytes(c.n_embd, c.n_tokens), "MoE activations");
  m.h_act = scratch(moe_h_act_, cuda::quantizedActBytes(c.n_ff, n_slots), "MoE expert activations");
  m.plan = static_cast<int*>(
      scratch(moe_plan_, moePlanBytes(static_cast<int>(c.layer_experts.size()), n_slots), "MoE expert plan"));
  if (!c.layer_experts.empty()) {
    moeLayerExperts(c, m);
    return;
  }
  auto flush = [&] {
    if (m.table.count > 0) cuda::launchMoeExperts(m, stream_);
    m.table.count = 0;
  };
  for (const ExpertRef* ref : c.experts) {
    const ExpertWeights& w = ref->weights;
    checkDeviceWeight(w.gate, "MoE gate");
    checkDeviceWeight(w.up, "MoE up");
    checkDeviceWeight(w.down, "MoE down");
    if (w.gate.type != w.up.type || w.gate.row_bytes != w.up.row_bytes || w.gate.rows != c.n_ff ||
        w.up.rows != c.n_ff || w.gate.cols != c.n_embd || w.up.cols != c.n_embd || w.down.rows != c.n_embd ||
        w.down.cols != c.n_ff)
      throw std::invalid_argument("cuda backend: expert " + std::to_string(ref->expert) +
                                  ": gate/up/down shapes or types do not match the layer");
    const cuda::ElemType up = elemType(w.gate.type, "MoE"), down = elemType(w.down.type, "MoE");
    if (m.table.count == cuda::kMaxCallExperts ||
        (m.table.count > 0 && (up != m.up_type || down != m.down_type || w.gate.row_bytes != m.up_row_bytes ||
                               w.down.row_bytes != m.down_row_bytes)))
      flush();
    m.up_type = up, m.down_type = down;
    m.up_row_bytes = w.gate.row_bytes, m.down_row_bytes = w.down.row_bytes;
    m.up_gemm = gemmFor(w.gate.type, c.n_tokens), m.down_gemm = gemmFor(w.down.type, c.n_tokens);
    if (c.host_ids) {
      const int served = static_cast<int>(std::count(c.host_ids, c.host_ids + n_slots, ref->expert));
      const uint64_t gate_up = viewBytes(w.gate) + viewBytes(w.up), down = viewBytes(w.down);
      traffic_.weight_bytes += gate_up + down;
      traffic_.bytes_read += m.up_gemm ? gate_up * cuda::gemmWeightPasses(served) +
                                             2 * actBytes(w.gate, served) * cuda::gemmActivationPasses(c.n_ff)
                                       : gate_up * matvecPasses(served) + actBytes(w.gate, served);
      traffic_.bytes_read += m.down_gemm ? down * cuda::gemmWeightPasses(served) +
                                               actBytes(w.down, served) * cuda::gemmActivationPasses(c.n_embd)
                                         : down * matvecPasses(served) + actBytes(w.down, served);
    }
    const int i = m.table.count++;
    m.table.ids[i] = ref->expert;
    m.table.gate[i] = w.gate.data;
    m.table.up[i] = w.up.data;
    m.table.down[i] = w.down.data;
  }
  flush();
}

// Every expert of the layer in one launch set; the plan kernel reads the routing
// on the device. The experts of a layer share their weight types (one tensor per
// projection in the file).
void CudaBackend::moeLayerExperts(const MoeExpertsCall& c, cuda::MoeLaunch& m) {
  const ExpertWeights& first = c.layer_experts.front();
  for (const ExpertWeights& w : c.layer_experts) {
    if (w.gate.type != first.gate.type || w.up.type != first.gate.type || w.down.type != first.down.type ||
        w.gate.row_bytes != first.gate.row_bytes || w.up.row_bytes != first.gate.row_bytes ||
        w.down.row_bytes != first.down.row_bytes || w.gate.rows != c.n_ff || w.up.rows != c.n_ff ||
        w.gate.cols != c.n_embd || w.up.cols != c.n_embd || w.down.rows != c.n_embd || w.down.cols != c.n_ff)
      throw std::invalid_argument("cuda backend: the experts of MoE layer " + std::to_string(c.layer) +
                                  " differ in shape or type");
  }
  checkDeviceWeight(first.gate, "MoE gate");
  checkDeviceWeight(first.up, "MoE up");
  checkDeviceWeight(first.down, "MoE down");
  m.up_type = elemType(first.gate.type, "MoE");
  m.down_type = elemType(first.down.type, "MoE");
  m.up_row_bytes = first.gate.row_bytes;
  m.down_row_bytes = first.down.row_bytes;
  m.up_gemm = gemmFor(first.gate.type, c.n_tokens);
  m.down_gemm = gemmFor(first.down.type, c.n_tokens);
  m.layer = deviceLayerExperts(c.layer, c.layer_experts);
  cuda::launchMoeExperts(m, stream_);
}

void CudaBackend::moeCombine(const float* outputs, const float* routing, int n_tokens, int k, int n_embd,
                             float* out) {
  cuda::launchMoeCombine(outputs, routing + static_cast<size_t>(n_tokens) * k, n_tokens, k, n_embd, out,
                         stream_);
}

}  // namespace moe
