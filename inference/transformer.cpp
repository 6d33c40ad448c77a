#include "inference/transformer.h"

#include "inference/transformer_scratch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace moe {
namespace {
constexpr size_t kNoLogits = static_cast<size_t>(-1);  // an early prefill chunk wants none
}  // namespace

// Host buffers for experts computed on the host backend, and the device rows
// their outputs cross into.
struct Transformer::HostScratch {
  Backend& be;
  std::vector<float> gathered;    // [batch][n_embd]
  std::vector<float> ff_a, ff_b;  // [batch][n_ff_exp]
  std::vector<float> rows;        // [batch * n_expert_used][n_embd] outputs, expert after expert
  float* device_rows;             // the same, on the device

  HostScratch(Backend& b, const ModelConfig& c, int batch) : be(b) {
    const size_t B = batch;
    gathered.resize(B * c.n_embd);
    ff_a.resize(B * c.n_ff_exp);
    ff_b.resize(B * c.n_ff_exp);
    rows.resize(B * c.n_expert_used * c.n_embd);
    device_rows = be.allocFloats(rows.size());
  }
  ~HostScratch() { be.freeFloats(device_rows); }
};

namespace {
std::atomic<uint64_t> next_transformer_id{1};
}  // namespace

Transformer::Transformer(const Model& model, Backend& backend, ExpertSource& experts, int n_ctx)
    : model_(model),
      cfg_(model.config()),
      backend_(backend),
      experts_(experts),
      n_ctx_(n_ctx),
      id_(next_transformer_id.fetch_add(1, std::memory_order_relaxed)) {
  if (n_ctx <= 0) throw std::invalid_argument("context length must be > 0");
  // A shared-KV layer (gemma4) keeps no cache of its own: it reads its source layer's.
  for (int il = 0; il < cfg_.n_layer; ++il) {
    const bool kv = !cfg_.isRecurrentLayer(il) && cfg_.ownsKv(il);
    const size_t width = size_t(cfg_.kvWidthOf(il));
    k_cache_.push_back(kv ? backend_.allocKv(size_t(n_ctx) * width) : KvCache{});
    v_cache_.push_back(kv ? backend_.allocKv(size_t(n_ctx) * width) : KvCache{});
  }
  if (cfg_.hasRecurrentLayers()) {
    auto allocState = [&](std::vector<RecurrentState>& layers) {
      layers.resize(size_t(cfg_.n_layer));
      for (int il = 0; il < cfg_.n_layer; ++il)
        if (cfg_.isRecurrentLayer(il)) {  // zero-filled: the state of an empty sequence
          layers[size_t(il)].conv = backend_.allocFloats(std::max<size_t>(cfg_.delta.convStateFloats(), 1));
          layers[size_t(il)].delta = backend_.allocFloats(cfg_.delta.deltaStateFloats());
        }
    };
    allocState(recurrent_);
    snapshots_.resize(kRecurrentSnapshots);
    for (RecurrentSnapshot& snap : snapshots_) allocState(snap.layers);
  }
  s_ = std::make_unique<Scratch>(backend_, cfg_, kMaxBatch);
  backend_.reserveScratch(cfg_, kMaxBatch, n_ctx);
}

Transformer::~Transformer() {
  h_.reset();
  s_.reset();
  for (const KvCache& kv : k_cache_)
    if (kv.data) backend_.freeKv(kv);
  for (const KvCache& kv : v_cache_)
    if (kv.data) backend_.freeKv(kv);
  auto freeState = [&](const std::vector<RecurrentState>& layers) {
    for (const RecurrentState& r : layers) {
      if (r.conv) backend_.freeFloats(r.conv);
      if (r.delta) backend_.freeFloats(r.delta);
    }
  };
  freeState(recurrent_);
  for (const RecurrentSnapshot& snap : snapshots_) freeState(snap.layers);
}

void Transformer::setHostBackend(Backend* host) {
  host_ = host;
  if (host_ && !h_) h_ = std::make_unique<HostScratch>(backend_, cfg_, kMaxBatch);  // its device rows, now
}

void Transformer::truncate(int n) {
  const int keep = std::clamp(n, 0, n_past_);
  if (cfg_.hasRecurrentLayers() && keep != n_past_) {
    history_.resize(size_t(keep));
    dropSnapshotsAbove(keep);  // the tokens after keep may be replaced
    recurrent_stale_ = true;   // restored and recomputed by the next forward (or reset, at 0)
  }
  n_past_ = keep;
}

void Transformer::checkCancel() const {
  if (cancel_ && cancel_->load(std::memory_order_relaxed)) throw Cancelled();
}

void Transformer::forward(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits) {
  if (tokens.empty()) throw std::invalid_argument("forward() needs at least one token");
  if (n_past_ + static_cast<int>(tokens.size()) > n_ctx_)
    throw std::length_error("context full: " + std::to_string(n_past_) + " cached + " +
                            std::to_string(tokens.size()) + " new tokens exceed the context of " +
                            std::to_string(n_ctx_));
  for (int32_t t : tokens)
    if (t < 0 || t >= cfg_.n_vocab)
      throw std::out_of_range("token id " + std::to_string(t) + " outside the vocabulary (" +
                              std::to_string(cfg_.n_vocab) + ")");
  if (recurrent_stale_) recomputeRecurrentState();
  logits.assign((all_logits ? tokens.size() : 1) * size_t(cfg_.n_vocab), 0.0f);
  const int start = n_past_;
  // A prefill of a model with recurrent layers stops one token short of its end for a
  // snapshot of the state there (the batches are cut at that token).
  const bool snapshot = cfg_.hasRecurrentLayers() && tokens.size() > 1;
  const size_t split = snapshot ? tokens.size() - 1 : tokens.size();
  auto run = [&](size_t begin, size_t end) {
    for (size_t first = begin; first < end; first += kMaxBatch) {
      const size_t n = std::min<size_t>(kMaxBatch, end - first);
      const bool last_chunk = first + n == tokens.size();
      if (all_logits)
        forwardBatch(tokens.subspan(first, n), logits, true, first * cfg_.n_vocab);
      else if (last_chunk)
        forwardBatch(tokens.subspan(first, n), logits, false, 0);
      else {
        std::vector<float> unused;
        forwardBatch(tokens.subspan(first, n), unused, false, kNoLogits);
      }
    }
  };
  try {
    run(0, split);
    if (snapshot) {
      takeSnapshot();
      run(split, tokens.size());
    }
  } catch (...) {
    n_past_ = start;  // a half-written step never counts as cached
    if (cfg_.hasRecurrentLayers()) {
      dropSnapshotsAbove(start);
      recurrent_stale_ = true;  // its state went on: restored and recomputed
    }
    throw;
  }
  if (cfg_.hasRecurrentLayers()) history_.insert(history_.end(), tokens.begin(), tokens.end());
}

// One batch of n <= kMaxBatch tokens at positions n_past_..; logits go to
// logits[logits_offset..] unless logits_offset is kNoLogits. A decode step that
// never needs the host before its logits is recorded and replayed as one graph
// where the backend can (Backend::beginStepCapture).
void Transformer::forwardBatch(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits,
                               size_t logits_offset) {
  const int n = static_cast<int>(tokens.size());
  positions_.resize(n);
  std::iota(positions_.begin(), positions_.end(), n_past_);
  if (on_batch_) on_batch_({n_past_, tokens});
  const bool wanted = logits_offset != kNoLogits;
  // Only the rows whose logits are wanted go through the output projection.
  const int first_row = all_logits ? 0 : n - 1;
  const int rows = n - first_row;

  bool ran = false;
  if (n == 1 && wanted && !graphs_off_ && stepStaysOnTheDevice()) {
    const Backend::StepValues step{tokens[0], n_past_, id_};
    ran = backend_.replayStep(step);
    if (!ran && backend_.beginStepCapture(step)) try {
        computeBatch(tokens, first_row, rows);
        backend_.endStepCapture();
        ran = true;
      } catch (const StepCaptureFailed& e) {
        backend_.abortStepCapture();  // nothing recorded ran: the step runs op by op below
        graphs_off_ = e.for_good;
      } catch (const DeviceError&) {
        // A call the device refused while recording (nothing recorded ran either): steps
        // run op by op from now on, and a fault that is real shows again there.
        backend_.abortStepCapture();
        graphs_off_ = true;
      } catch (...) {
        backend_.abortStepCapture();
        throw;
      }
  }
  mapped_layers_.clear();
  if (!ran) computeBatch(tokens, first_row, wanted ? rows : 0);
  n_past_ += n;
  if (wanted) backend_.toHost(logits.data() + logits_offset, s_->logits, size_t(rows) * cfg_.n_vocab);
  if (!mapped_layers_.empty()) {
    if (!wanted) backend_.synchronize();  // else the logits' read back waited for the routing's too
    deliverMappedRouting();
  }
}

void Transformer::deliverMappedRouting() {
  const size_t k = size_t(cfg_.n_expert_used);
  std::vector<int> ids(k);
  for (int il : mapped_layers_) {
    const std::vector<float>& r = mapped_routing_[size_t(il)];
    std::memcpy(ids.data(), r.data(), k * sizeof(int));
    const RoutingEvent ev{il, 1, ids, std::span<const float>(r.data() + k, k)};
    experts_.onRouting(ev);
    if (on_routing_) on_routing_(ev);
    experts_.routedOnDevice(ev);
  }
  mapped_layers_.clear();
}

// Every layer of the batch, then (rows > 0) the output norm and projection of its
// last `rows` rows into s_->logits.
void Transformer::computeBatch(std::span<const int32_t> tokens, int first_row, int rows) {
  const int n = static_cast<int>(tokens.size());
  const auto& w = model_.weights();
  backend_.embed(w.token_embd, tokens.data(), n, s_->x);
  if (cfg_.embedding_scaled) backend_.scale(s_->x, std::sqrt(float(cfg_.n_embd)), size_t(n) * cfg_.n_embd);
  pending_residual_ = nullptr;  // a cancelled step may have left one
  reportHidden(0, n);
  for (int il = 0; il < cfg_.n_layer; ++il) {
    checkCancel();
    if (cfg_.isGemma4()) {
      gemma4Layer(il, n);
      reportHidden(il + 1, n);
      continue;
    }
    attentionBlock(il, n);
    if (cfg_.isMoeLayer(il))
      moeBlock(il, n);
    else
      denseFfn(il, n);
    reportHidden(il + 1, n);
  }
  if (rows == 0) {
    pending_residual_ = nullptr;  // the stream is not read again: the next step embeds anew
    return;
  }
  const size_t E = cfg_.n_embd;
  // The last block's output joins the stream in the output norm, for the rows read.
  if (pending_residual_)
    backend_.addRmsNorm(s_->x + first_row * E, pending_residual_ + first_row * E, w.output_norm, s_->xn, rows,
                        cfg_.n_embd, cfg_.rms_eps);
  else
    backend_.rmsNorm(s_->x + first_row * E, w.output_norm, s_->xn, rows, cfg_.n_embd, cfg_.rms_eps);
  pending_residual_ = nullptr;
  backend_.matmul(w.output, s_->xn, s_->logits, rows);
  if (cfg_.final_logit_softcap > 0)
    backend_.softcap(s_->logits, cfg_.final_logit_softcap, size_t(rows) * cfg_.n_vocab);
}

// Whether a step needs the host only for its logits: no observer reads the hidden
// states or the routing, and every MoE layer routes and picks its experts on the
// backend (moeBlockOnDevice).
bool Transformer::stepStaysOnTheDevice() const {
  // gemma4's global layers upload their rope table (frequency factors) every step.
  if (cfg_.isGemma4() && !model_.weights().rope_freqs.empty()) return false;
  if (!backend_.computesMoe() || host_ || on_routing_ || on_hidden_ || replay_) return false;
  for (int il = 0; il < cfg_.n_layer; ++il)
    if (cfg_.isMoeLayer(il) && experts_.everyExpert(il).empty()) return false;
  return true;
}

void Transformer::reportHidden(int index, int n) {
  if (!on_hidden_) return;
  if (pending_residual_) backend_.add(s_->x, pending_residual_, size_t(n) * cfg_.n_embd);
  pending_residual_ = nullptr;
  hidden_host_.resize(size_t(n) * cfg_.n_embd);
  backend_.toHost(hidden_host_.data(), s_->x, hidden_host_.size());
  on_hidden_({index, n, n_past_, hidden_host_});
}

void Transformer::addBias(float* x, const float* bias, int n_rows, int width) {
  if (!bias) return;
  for (int r = 0; r < n_rows; ++r) backend_.add(x + size_t(r) * width, bias, width);
}

void Transformer::attentionBlock(int il, int n) {
  if (cfg_.isMla()) return latentAttentionBlock(il, n);
  if (cfg_.isRecurrentLayer(il)) return deltaNetBlock(il, n);
  if (cfg_.attn_output_gate) return gatedAttentionBlock(il, n);
  const auto& L = model_.weights().layers[il];
  const int E = cfg_.n_embd, Q = cfg_.qWidth(), KV = cfg_.kvWidth(), hd = cfg_.head_dim;
  normInput(L.attn_norm, n);
  const Backend::MatmulJob qkv[] = {
      {L.wq, s_->xn, s_->q, n}, {L.wk, s_->xn, s_->k, n}, {L.wv, s_->xn, s_->v, n}};
  backend_.matmulMany(qkv);
  addBias(s_->q, L.bq, n, Q);
  addBias(s_->k, L.bk, n, KV);
  addBias(s_->v, L.bv, n, KV);
  if (cfg_.qk_norm == QkNorm::PerHead) {
    backend_.rmsNorm(s_->q, L.q_norm, s_->q, n * cfg_.n_head, hd, cfg_.rms_eps);
    backend_.rmsNorm(s_->k, L.k_norm, s_->k, n * cfg_.n_head_kv, hd, cfg_.rms_eps);
  } else if (cfg_.qk_norm == QkNorm::Whole) {
    backend_.rmsNorm(s_->q, L.q_norm, s_->q, n, Q, cfg_.rms_eps);
    backend_.rmsNorm(s_->k, L.k_norm, s_->k, n, KV, cfg_.rms_eps);
  }
  if (cfg_.yarn.active()) {
    rope(s_->q, n, cfg_.n_head);
    rope(s_->k, n, cfg_.n_head_kv);
  } else {
    backend_.ropePair(s_->q, cfg_.n_head, s_->k, cfg_.n_head_kv, n, cfg_.head_dim, cfg_.n_rot,
                      positions_.data(), cfg_.rope_freq_base, cfg_.rope_style);
  }
  backend_.storeKvPair(k_cache_[il], v_cache_[il], size_t(n_past_) * KV, s_->k, s_->v, size_t(n) * KV);

  AttentionShape shape{cfg_.n_head, cfg_.n_head_kv, hd, 1.0f / std::sqrt(float(hd))};
  shape.sinks = L.attn_sinks;
  shape.window = cfg_.windowOf(il);
  backend_.attention(s_->q, k_cache_[il], v_cache_[il], n_past_, n, shape, s_->attn);
  backend_.matmul(L.wo, s_->attn, s_->out, n);
  addBias(s_->out, L.bo, n, E);
  pending_residual_ = s_->out;  // added to the stream by the next norm
}

// xn = rmsNorm(x) with `weight`, the pending block output added to the stream x
// first (one launch for both on a device backend).
void Transformer::normInput(const float* weight, int n) {
  if (pending_residual_)
    backend_.addRmsNorm(s_->x, pending_residual_, weight, s_->xn, n, cfg_.n_embd, cfg_.rms_eps);
  else
    backend_.rmsNorm(s_->x, weight, s_->xn, n, cfg_.n_embd, cfg_.rms_eps);
  pending_residual_ = nullptr;
}

void Transformer::rope(float* x, int n, int n_heads) {
  if (cfg_.yarn.active())
    backend_.ropeYarn(x, n, n_heads, cfg_.head_dim, cfg_.n_rot, positions_.data(), cfg_.rope_freq_base,
                      cfg_.rope_style, cfg_.yarn);
  else
    backend_.rope(x, n, n_heads, cfg_.head_dim, cfg_.n_rot, positions_.data(), cfg_.rope_freq_base,
                  cfg_.rope_style);
}

void Transformer::activate(Backend& be, const float* gate, const float* up, float* out, size_t n) const {
  if (cfg_.gelu_ffn)
    be.geglu(gate, up, out, n);
  else if (cfg_.clamped_swiglu)
    be.swigluClamped(gate, up, out, n, ModelConfig::kSwigluAlpha, ModelConfig::kSwigluLimit);
  else
    be.swiglu(gate, up, out, n);
}

void Transformer::denseFfn(int il, int n) {
  const auto& L = model_.weights().layers[il];
  const int F = cfg_.n_ff;
  normInput(L.ffn_norm, n);
  const Backend::MatmulJob gate_up[] = {{L.ffn_gate, s_->xn, s_->ff_a, n}, {L.ffn_up, s_->xn, s_->ff_b, n}};
  backend_.matmulMany(gate_up);
  activate(backend_, s_->ff_a, s_->ff_b, s_->ff_a, size_t(n) * F);
  backend_.matmul(L.ffn_down, s_->ff_a, s_->out, n);
  pending_residual_ = s_->out;
}

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
