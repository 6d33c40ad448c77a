#include "inference/transformer.h"

#include "inference/transformer_scratch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace moe {
namespace {
constexpr size_t kNoLogits = static_cast<size_t>(-1);  // an early prefill chunk wants none
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
  backend_.reserveRopes(layerRopes(), n_ctx);
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
  while (!queued_.empty() && queued_.back().pos >= keep) queued_.pop_back();
  if (keep != n_past_) chose_on_device_ = false;
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
  forwardTokens(tokens, Output{logits}, all_logits);
}

bool Transformer::reducesTo(const LogitsReduction& reduce) const {
  // Candidates of 8 bytes as large as the row of 4: the row itself.
  const bool smaller = uint64_t(reduce.k) * sizeof(LogitCandidate) < uint64_t(cfg_.n_vocab) * sizeof(float);
  return reduce.k > 0 && reduce.k <= backend_.maxLogitCandidates() && smaller;
}

bool Transformer::forward(std::span<const int32_t> tokens, const LogitsReduction& reduce,
                          std::vector<float>& logits, std::vector<LogitCandidate>& best) {
  if (!reducesTo(reduce)) {
    forwardTokens(tokens, Output{logits}, false);
    return false;
  }
  forwardTokens(tokens, Output{logits, &reduce, &best}, false);
  return true;
}

void Transformer::forwardTokens(std::span<const int32_t> tokens, const Output& out, bool all_logits) {
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
  if (!out.reduce) out.logits.assign((all_logits ? tokens.size() : 1) * size_t(cfg_.n_vocab), 0.0f);
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
        forwardBatch(tokens.subspan(first, n), out, true, first * cfg_.n_vocab);
      else if (last_chunk)
        forwardBatch(tokens.subspan(first, n), out, false, 0);
      else {
        std::vector<float> unused;
        forwardBatch(tokens.subspan(first, n), Output{unused}, false, kNoLogits);
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
// out.logits[logits_offset..] (or, reduced, to out.best) unless logits_offset is
// kNoLogits. A decode step that never needs the host before its logits is recorded
// and replayed as one graph where the backend can (Backend::beginStepCapture), its
// reduction of the logits included.
void Transformer::forwardBatch(std::span<const int32_t> tokens, const Output& out, bool all_logits,
                               size_t logits_offset) {
  const int n = static_cast<int>(tokens.size());
  positions_.resize(n);
  std::iota(positions_.begin(), positions_.end(), n_past_);
  if (on_batch_) on_batch_({n_past_, tokens});
  const bool wanted = logits_offset != kNoLogits;
  // Only the rows whose logits are wanted go through the output projection.
  const int first_row = all_logits ? 0 : n - 1;
  const int rows = n - first_row;

  const LogitsReduction* reduce = wanted && !all_logits ? out.reduce : nullptr;
  bool ran = false;
  if (n == 1 && wanted && !graphs_off_ && stepStaysOnTheDevice())
    ran = runAsGraph({tokens[0], n_past_, id_, reduce, false}, tokens);
  mapped_layers_.clear();
  if (!ran) {
    computeBatch(tokens, first_row, wanted ? rows : 0);
    if (reduce) backend_.reduceLogits(s_->logits, cfg_.n_vocab, *reduce);
  }
  n_past_ += n;
  chose_on_device_ = reduce && (reduce->k == 1 || reduce->draw);
  if (reduce && !out.best) {
    queueCandidates(reduce->k);
  } else if (reduce) {
    out.best->resize(size_t(reduce->k));
    backend_.readLogitCandidates(*out.best);
  } else if (wanted) {
    backend_.toHost(out.logits.data() + logits_offset, s_->logits, size_t(rows) * cfg_.n_vocab);
  }
  if (!mapped_layers_.empty()) {
    // Else the logits' read back waited for the routing's too.
    if (!wanted || (reduce && !out.best)) backend_.synchronize();
    deliverMappedRouting();
  }
}

// Replays the recorded decode step (one token; its logits reduced where step.reduce is
// set), or records it and runs the recording; false where neither could be done:
// nothing of the step ran.
bool Transformer::runAsGraph(const Backend::StepValues& step, std::span<const int32_t> tokens) {
  if (backend_.replayStep(step)) return true;
  if (!backend_.beginStepCapture(step)) return false;
  try {
    computeBatch(tokens, 0, 1);
    if (step.reduce) backend_.reduceLogits(s_->logits, cfg_.n_vocab, *step.reduce);
    backend_.endStepCapture();
    return true;
  } catch (const StepCaptureFailed& e) {
    backend_.abortStepCapture();  // nothing recorded ran: the step runs op by op (or not at all)
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
  return false;
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

std::vector<Backend::RopeParams> Transformer::layerRopes() const {
  std::vector<Backend::RopeParams> ropes;
  for (int il = 0; il < cfg_.n_layer; ++il) {
    // Transformer::rope's and ropePair's (which has no YaRN: it runs when none is active).
    const Backend::RopeParams r = cfg_.isGemma4()
                                      ? gemma4Rope(il)
                                      : Backend::RopeParams{cfg_.n_rot, cfg_.rope_freq_base, cfg_.yarn, {}};
    const bool known = std::any_of(ropes.begin(), ropes.end(), [&](const Backend::RopeParams& o) {
      return o.n_rot == r.n_rot && o.base == r.base && o.factors.data() == r.factors.data() &&
             o.yarn.active() == r.yarn.active();
    });
    if (!known) ropes.push_back(r);
  }
  return ropes;
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

}  // namespace moe
