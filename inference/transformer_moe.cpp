// The MoE block of the forward pass: routing (the model's router, a replayed trace,
// or the device's own top-k), the routed experts in the expert source's order (on the
// backend together or one by one, the host backend's share on the host), their
// weighted sum and the shared experts.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "inference/transformer.h"
#include "inference/transformer_scratch.h"

namespace moe {

void Transformer::moeBlock(int il, int n) {
  const auto& L = model_.weights().layers[il];
  const int E = cfg_.n_embd, K = cfg_.n_expert_used, NE = cfg_.n_expert;
  if (backend_.computesMoe() && !host_ && !on_routing_ && !replay_)
    if (const auto every = experts_.everyExpert(il); !every.empty()) return moeBlockOnDevice(il, n, every);
  if (backend_.computesMoe() && n == 1)
    if (const auto map = experts_.mappedExperts(il); !map.empty()) return moeBlockMapped(il, map);
  const float* router_in = moeInputs(il, n);

  // The expert source sees the layer's FFN input first (a predictor's hook).
  hidden_on_host_ = experts_.wantsLayerInput();
  if (hidden_on_host_) backend_.toHost(s_->host_hidden.data(), s_->xn, size_t(n) * E);
  experts_.onLayerInput(il,
                        hidden_on_host_ ? std::span<const float>(s_->host_hidden.data(), size_t(n) * E)
                                        : std::span<const float>(),
                        n);

  backend_.matmul(L.router, router_in, s_->router, n);
  addBias(s_->router, L.router_bias, n, NE);
  RoutingRule rule = RoutingRule::of(cfg_);
  if (!L.expert_bias.empty()) rule.selection_bias = L.expert_bias.data();
  if (backend_.computesMoe()) {
    backend_.routeTopK(s_->router, n, rule, s_->routing, s_->chosen.data(), s_->chosen_w.data());
    if (L.expert_out_scale_dev) {  // gemma4, as below
      backend_.scaleRoutingWeights(s_->routing, n, K, L.expert_out_scale_dev);
      for (size_t i = 0; i < size_t(n) * K; ++i) s_->chosen_w[i] *= L.expert_out_scale[size_t(s_->chosen[i])];
    }
  } else {
    backend_.toHost(s_->host_router.data(), s_->router, size_t(n) * NE);
    for (int t = 0; t < n; ++t)
      routeToken(&s_->host_router[size_t(t) * NE], rule, &s_->chosen[size_t(t) * K],
                 &s_->chosen_w[size_t(t) * K]);
    // gemma4: each expert's output scale (ffn_down_exps.scale) on its routing weight,
    // the same product as llama.cpp's scale of the expert's down projection.
    if (!L.expert_out_scale.empty())
      for (size_t i = 0; i < size_t(n) * K; ++i) s_->chosen_w[i] *= L.expert_out_scale[size_t(s_->chosen[i])];
  }
  if (replay_) replayRouting(il, n);
  const RoutingEvent routed{il, n, std::span<const int>(s_->chosen.data(), size_t(n) * K),
                            std::span<const float>(s_->chosen_w.data(), size_t(n) * K)};
  experts_.onRouting(routed);
  if (on_routing_) on_routing_(routed);

  // Which (token, rank) pairs each expert serves: slot t*K + j of expert_out.
  std::vector<std::vector<int>> served(NE);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < K; ++j) served[s_->chosen[size_t(t) * K + j]].push_back(t * K + j);
  std::vector<int> needed;
  for (int e = 0; e < NE; ++e)
    if (!served[e].empty()) needed.push_back(e);

  // Experts run in the order the source gives (ready ones first); their outputs
  // are kept per (token, rank) and summed afterwards in rank order, so the result
  // is bit-identical whatever the order: every caching policy computes the same.
  const std::vector<ExpertRef> order = experts_.acquire(il, needed);
  float* moe_out = s_->out;  // [n][n_embd]: the weighted sum of each token's experts
  if (backend_.computesMoe()) {
    expertsOnBackend(il, n, order, served);
    backend_.moeCombine(s_->expert_out, s_->routing, n, K, E, moe_out);
  } else {
    expertsOneByOneOrTogether(il, order, served);
    backend_.zero(moe_out, size_t(n) * E);
    for (int t = 0; t < n; ++t)
      for (int j = 0; j < K; ++j)
        backend_.axpy(moe_out + size_t(t) * E, s_->expert_out + (size_t(t) * K + j) * E,
                      s_->chosen_w[size_t(t) * K + j], E);
  }
  experts_.release(il);

  if (!L.shexp_gate.empty()) sharedExperts(il, n, moe_out);
  pending_residual_ = moe_out;
}

const float* Transformer::moeInputs(int il, int n) {
  const auto& L = model_.weights().layers[il];
  if (!cfg_.isGemma4()) {
    normInput(L.ffn_norm, n);
    return s_->xn;
  }
  // gemma4 (llama.cpp src/models/gemma4.cpp): the experts read pre_ffw_norm_2(x), the
  // router rms(x) x ffn_gate_inp.scale / sqrt(n_embd); x is the attention's output
  // added to the stream.
  backend_.rmsNorm(s_->x, L.ffn_pre_norm_2, s_->xn, n, cfg_.n_embd, cfg_.rms_eps);
  backend_.rmsNorm(s_->x, L.router_in_norm, s_->router_in, n, cfg_.n_embd, cfg_.rms_eps);
  return s_->router_in;
}

void Transformer::replayRouting(int il, int n) {
  const int K = cfg_.n_expert_used;
  const size_t nk = size_t(n) * K;
  const std::span<int> ids(s_->chosen.data(), nk);
  const std::span<float> weights(s_->chosen_w.data(), nk);
  replay_->route(il, positions_[0], n, ids, weights);
  for (int id : ids)
    if (id < 0 || id >= cfg_.n_expert)
      throw std::invalid_argument("routing replay: expert " + std::to_string(id) + " of " +
                                  std::to_string(cfg_.n_expert));
  if (!backend_.computesMoe()) return;
  // The backend's copy: ids (int32 bits) then weights, as routeTopK writes them.
  std::vector<float> routing(2 * nk);
  std::memcpy(routing.data(), ids.data(), nk * sizeof(int));
  std::memcpy(routing.data() + nk, weights.data(), nk * sizeof(float));
  backend_.fromHost(s_->routing, routing.data(), routing.size());
}

void Transformer::moeBlockOnDevice(int il, int n, std::span<const ExpertWeights> every_expert) {
  const auto& L = model_.weights().layers[il];
  backend_.matmul(L.router, moeInputs(il, n), s_->router, n);
  addBias(s_->router, L.router_bias, n, cfg_.n_expert);
  RoutingRule rule = RoutingRule::of(cfg_);
  if (!L.expert_bias.empty()) rule.selection_bias = L.expert_bias.data();
  backend_.routeTopK(s_->router, n, rule, s_->routing, nullptr, nullptr);
  if (L.expert_out_scale_dev)
    backend_.scaleRoutingWeights(s_->routing, n, cfg_.n_expert_used, L.expert_out_scale_dev);
  Backend::MoeExpertsCall call = expertsCall(il, n);
  call.layer_experts = every_expert;
  backend_.moeExperts(call);
  float* moe_out = s_->out;
  backend_.moeCombine(s_->expert_out, s_->routing, n, cfg_.n_expert_used, cfg_.n_embd, moe_out);
  if (!L.shexp_gate.empty()) sharedExperts(il, n, moe_out);
  pending_residual_ = moe_out;
}

void Transformer::moeBlockMapped(int il, std::span<const ExpertWeights> map) {
  const auto& L = model_.weights().layers[il];
  backend_.matmul(L.router, moeInputs(il, 1), s_->router, 1);
  addBias(s_->router, L.router_bias, 1, cfg_.n_expert);
  RoutingRule rule = RoutingRule::of(cfg_);
  if (!L.expert_bias.empty()) rule.selection_bias = L.expert_bias.data();
  backend_.routeTopK(s_->router, 1, rule, s_->routing, nullptr, nullptr);
  if (L.expert_out_scale_dev)
    backend_.scaleRoutingWeights(s_->routing, 1, cfg_.n_expert_used, L.expert_out_scale_dev);
  if (replay_) replayRouting(il, 1);
  Backend::MoeExpertsCall call = expertsCall(il, 1);
  call.host_ids = nullptr;
  call.layer_experts = map;
  try {
    backend_.moeExperts(call);
  } catch (...) {
    experts_.mappedLayerQueued(il);  // its slots are free again whatever happened
    throw;
  }
  experts_.mappedLayerQueued(il);
  // What the device chose, for the source to learn once the step is done.
  if (mapped_routing_.size() < size_t(cfg_.n_layer)) mapped_routing_.resize(size_t(cfg_.n_layer));
  mapped_routing_[size_t(il)].resize(2 * size_t(cfg_.n_expert_used));
  backend_.toHostLater(mapped_routing_[size_t(il)].data(), s_->routing, 2 * size_t(cfg_.n_expert_used));
  mapped_layers_.push_back(il);
  float* moe_out = s_->out;
  backend_.moeCombine(s_->expert_out, s_->routing, 1, cfg_.n_expert_used, cfg_.n_embd, moe_out);
  if (!L.shexp_gate.empty()) sharedExperts(il, 1, moe_out);
  pending_residual_ = moe_out;
}

Backend::MoeExpertsCall Transformer::expertsCall(int il, int n) const {
  Backend::MoeExpertsCall call;
  call.x = s_->xn;
  call.routing = s_->routing;
  call.host_ids = s_->chosen.data();
  call.n_tokens = n;
  call.k = cfg_.n_expert_used;
  call.n_embd = cfg_.n_embd;
  call.n_ff = cfg_.n_ff_exp;
  call.h = s_->h;
  call.outputs = s_->expert_out;
  call.layer = il;
  const auto& L = model_.weights().layers[il];
  call.gate_bias = L.exp_gate_bias;
  call.up_bias = L.exp_up_bias;
  call.down_bias = L.exp_down_bias;
  call.clamped_swiglu = cfg_.clamped_swiglu;
  call.gelu = cfg_.gelu_ffn;
  call.swiglu_alpha = ModelConfig::kSwigluAlpha;
  call.swiglu_limit = ModelConfig::kSwigluLimit;
  return call;
}

// The routed experts on a backend that computes them itself: all at once when the
// source has them all ready; else, in the source's order, each run of experts
// that were ready at acquire in one call (one set of launches) and each other
// expert right after its waitFor (the next expert's copy overlaps it); the
// source's on_host experts on the host backend.
void Transformer::expertsOnBackend(int il, int n, const std::vector<ExpertRef>& order,
                                   const std::vector<std::vector<int>>& served) {
  const bool all_ready = experts_.allReady();
  std::vector<const ExpertRef*> on_host, together;
  Backend::MoeExpertsCall call = expertsCall(il, n);
  auto computeTogether = [&] {
    if (together.empty()) return;
    call.experts = together;
    backend_.moeExperts(call);
    together.clear();
  };
  for (const ExpertRef& ref : order) {
    const bool alone = !(host_ && ref.on_host) && !all_ready && !ref.ready;
    if (alone) computeTogether();  // the run before it is queued before it waits
    experts_.waitFor(il, ref);
    if (host_ && ref.on_host) {
      on_host.push_back(&ref);
    } else if (!alone) {
      together.push_back(&ref);
    } else {
      const ExpertRef* one = &ref;
      call.experts = {&one, 1};
      backend_.moeExperts(call);
    }
  }
  computeTogether();
  if (!on_host.empty()) hostExperts(il, on_host, served);
}

void Transformer::expertsOneByOneOrTogether(int il, const std::vector<ExpertRef>& order,
                                            const std::vector<std::vector<int>>& served) {
  const bool one_by_one = !experts_.allReady();
  std::vector<const ExpertRef*> on_host, together;
  int together_rows = 0;
  for (const ExpertRef& ref : order) {
    experts_.waitFor(il, ref);
    if (host_ && ref.on_host) {
      on_host.push_back(&ref);
      continue;
    }
    const ExpertRef* one = &ref;
    if (one_by_one) {  // right after its waitFor: the next expert's copy overlaps it
      expertsTogether(il, {&one, 1}, served);
      continue;
    }
    const int m = static_cast<int>(served.at(ref.expert).size());
    if (together_rows + m > kMaxBatch) {  // the scratch holds kMaxBatch rows
      expertsTogether(il, together, served);
      together.clear();
      together_rows = 0;
    }
    together.push_back(one);
    together_rows += m;
  }
  if (!together.empty()) expertsTogether(il, together, served);
  if (!on_host.empty()) hostExperts(il, on_host, served);
}

// gpt-oss: each expert's bias row added to the rows it computed (rows of `width`
// from `first[i]` for refs[i]).
void Transformer::addExpertBiases(std::span<const ExpertRef* const> refs,
                                  const std::vector<std::vector<int>>& served, const std::vector<int>& first,
                                  const float* biases, float* rows, int width) {
  if (!biases) return;
  for (size_t i = 0; i < refs.size(); ++i) {
    const float* bias = biases + size_t(refs[i]->expert) * width;
    for (size_t r = 0; r < served.at(refs[i]->expert).size(); ++r)
      backend_.add(rows + (size_t(first[i]) + r) * width, bias, size_t(width));
  }
}

void Transformer::expertsTogether(int il, std::span<const ExpertRef* const> refs,
                                  const std::vector<std::vector<int>>& served) {
  const auto& L = model_.weights().layers[il];
  const int E = cfg_.n_embd, K = cfg_.n_expert_used, F = cfg_.n_ff_exp;
  // Expert after expert, its tokens' rows in gathered / ff_a / ff_b from `first`.
  std::vector<int> first;
  int rows = 0;
  for (const ExpertRef* ref : refs) {
    first.push_back(rows);
    for (int slot : served.at(ref->expert))
      backend_.copy(s_->gathered + size_t(rows++) * E, s_->xn + size_t(slot / K) * E, E);
  }
  std::vector<Backend::MatmulJob> jobs;
  for (size_t i = 0; i < refs.size(); ++i) {
    const int m = static_cast<int>(served.at(refs[i]->expert).size());
    const float* x = s_->gathered + size_t(first[i]) * E;
    jobs.push_back({refs[i]->weights.gate, x, s_->ff_a + size_t(first[i]) * F, m});
    jobs.push_back({refs[i]->weights.up, x, s_->ff_b + size_t(first[i]) * F, m});
  }
  backend_.matmulMany(jobs);
  addExpertBiases(refs, served, first, L.exp_gate_bias, s_->ff_a, F);
  addExpertBiases(refs, served, first, L.exp_up_bias, s_->ff_b, F);
  activate(backend_, s_->ff_a, s_->ff_b, s_->ff_a, size_t(rows) * F);
  jobs.clear();
  for (size_t i = 0; i < refs.size(); ++i) {
    const int m = static_cast<int>(served.at(refs[i]->expert).size());
    jobs.push_back(
        {refs[i]->weights.down, s_->ff_a + size_t(first[i]) * F, s_->gathered + size_t(first[i]) * E, m});
  }
  backend_.matmulMany(jobs);
  addExpertBiases(refs, served, first, L.exp_down_bias, s_->gathered, E);
  for (size_t i = 0; i < refs.size(); ++i) {
    const auto& slots = served.at(refs[i]->expert);
    for (size_t r = 0; r < slots.size(); ++r)
      backend_.copy(s_->expert_out + size_t(slots[r]) * E, s_->gathered + (first[i] + r) * E, E);
  }
}

// The device's experts of this layer are queued: compute these on the host from the
// layer's FFN input (already on the host for the expert source), then one copy of
// all their output rows to the device and into their (token, rank) places.
void Transformer::hostExperts(int il, std::span<const ExpertRef* const> refs,
                              const std::vector<std::vector<int>>& served) {
  const int E = cfg_.n_embd, K = cfg_.n_expert_used, F = cfg_.n_ff_exp;
  if (!h_) h_ = std::make_unique<HostScratch>(backend_, cfg_, kMaxBatch);
  HostScratch& h = *h_;
  if (!hidden_on_host_) {
    size_t n_rows = 0;
    for (const ExpertRef* ref : refs)
      for (int slot : served.at(ref->expert)) n_rows = std::max(n_rows, size_t(slot / K) + 1);
    backend_.toHost(s_->host_hidden.data(), s_->xn, n_rows * E);
    hidden_on_host_ = true;
  }
  const Model::ExpertBiases& biases = model_.hostExpertBiases(il);
  // Each of m rows of `width` plus the expert's bias row, where the model has biases.
  auto addBiasRows = [&](float* rows, const float* bias, int expert, int m, int width) {
    if (!bias) return;
    for (int i = 0; i < m; ++i) host_->add(rows + size_t(i) * width, bias + size_t(expert) * width, width);
  };
  size_t row = 0;
  for (const ExpertRef* ref : refs) {
    const auto& slots = served.at(ref->expert);
    const int m = static_cast<int>(slots.size());
    for (int i = 0; i < m; ++i)
      std::copy_n(s_->host_hidden.data() + size_t(slots[i] / K) * E, E, h.gathered.data() + size_t(i) * E);
    host_->matmul(ref->weights.gate, h.gathered.data(), h.ff_a.data(), m);
    host_->matmul(ref->weights.up, h.gathered.data(), h.ff_b.data(), m);
    addBiasRows(h.ff_a.data(), biases.gate, ref->expert, m, F);
    addBiasRows(h.ff_b.data(), biases.up, ref->expert, m, F);
    activate(*host_, h.ff_a.data(), h.ff_b.data(), h.ff_a.data(), size_t(m) * F);
    host_->matmul(ref->weights.down, h.ff_a.data(), h.rows.data() + row * E, m);
    addBiasRows(h.rows.data() + row * E, biases.down, ref->expert, m, E);
    row += size_t(m);
  }
  backend_.fromHost(h.device_rows, h.rows.data(), row * E);
  row = 0;
  for (const ExpertRef* ref : refs)
    for (int slot : served.at(ref->expert))
      backend_.copy(s_->expert_out + size_t(slot) * E, h.device_rows + (row++) * E, E);
}

// Shared experts run on every token: deepseek adds them as they are; qwen2moe
// scales them per token by sigmoid(ffn_gate_inp_shexp . x).
void Transformer::sharedExperts(int il, int n, float* moe_out) {
  const auto& L = model_.weights().layers[il];
  const int E = cfg_.n_embd, S = cfg_.n_ff_shexp;
  const Backend::MatmulJob gate_up[] = {{L.shexp_gate, s_->xn, s_->ff_a, n},
                                        {L.shexp_up, s_->xn, s_->ff_b, n}};
  backend_.matmulMany(gate_up);
  activate(backend_, s_->ff_a, s_->ff_b, s_->ff_a, size_t(n) * S);
  backend_.matmul(L.shexp_down, s_->ff_a, s_->gathered, n);
  if (L.shexp_router.empty()) {
    backend_.add(moe_out, s_->gathered, size_t(n) * E);
    return;
  }
  backend_.matmul(L.shexp_router, s_->xn, s_->scalar, n);
  backend_.sigmoidGatedAdd(moe_out, s_->gathered, s_->scalar, n, E);
}

}  // namespace moe
