// The forward pass of the SwiGLU MoE family over a Backend, with its KV cache.
// One instance = one sequence (one conversation's context).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "inference/backend.h"
#include "inference/expert_source.h"
#include "inference/model.h"
#include "inference/routing_replay.h"

namespace moe {

class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled") {}
};

// One forward batch about to run (a prompt is split into batches of at most
// kMaxBatch tokens; a decode step is a batch of one), reported before its layers.
struct BatchEvent {
  int first_pos = 0;                // position of tokens[0]
  std::span<const int32_t> tokens;  // [n_tokens]; kChosenOnDevice: a token the host does not know yet
};
// The token of a decode step queued before the host read it (Transformer::queueChosenStep).
inline constexpr int32_t kChosenOnDevice = -1;

// A named intermediate of one forward step, for diffing layer by layer against a
// reference (tools/reference/moe_reference.py --dump-hidden numbers them alike):
// index 0 = the embeddings, index L+1 = the residual stream after layer L.
struct HiddenEvent {
  int index = 0;
  int n_tokens = 0;
  int first_pos = 0;              // position of the first row
  std::span<const float> values;  // [n_tokens][n_embd], host memory
};

class Transformer {
 public:
  // n_ctx: context length of this sequence (<= the model's trained context is not
  // required). Its KV cache holds 2 * n_layer * n_ctx * kv_width elements of the
  // backend's KV type (allocKv): 4 bytes each on the CPU backend, 2 (F16) on CUDA.
  Transformer(const Model& model, Backend& backend, ExpertSource& experts, int n_ctx);
  ~Transformer();
  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  // Runs `tokens` at positions nPast().. and appends them to the KV cache. Writes
  // the logits of the last token ([n_vocab]) or, with all_logits, of every token
  // ([n_tokens][n_vocab]) to `logits`. Throws std::length_error past the context,
  // Cancelled when `cancel` turns true between layers (the cache is then rolled back).
  void forward(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits = false);
  // Like forward, where the backend reduces logits (Backend::reduceLogits), reduce.k
  // is within its limit and its entries are fewer bytes than the row: the last token's
  // logits stay there, reduced to the best reduce.k entries, and only those come back,
  // into `best`; returns true. Else returns false and writes `logits` as forward does.
  bool forward(std::span<const int32_t> tokens, const LogitsReduction& reduce, std::vector<float>& logits,
               std::vector<LogitCandidate>& best);
  bool reducesLogits() const { return backend_.maxLogitCandidates() > 0; }
  // Whether forward(tokens, reduce, ...) reduces on the backend (else it reads the row).
  bool reducesTo(const LogitsReduction& reduce) const;

  // Decoding a step ahead (the Generator's greedy or sampled decode,
  // transformer_queued.cpp): a step is queued with its candidates' copy to the host,
  // and the host reads them (takeCandidates) once the next step is queued, so the
  // device never waits for it.
  // Whether queueChosenStep can run here: the backend embeds the token it chose, the
  // steps are recorded (no observer of the routing or hidden states, every expert in
  // place), and no layer is recurrent (its state cannot step back past a step whose
  // token the reply then refuses).
  bool decodesAhead() const;
  // Queues the decode step of `token` as forward(tokens, reduce, ...) runs it (reducesTo
  // must hold) and the copy of its candidates, without waiting. Throws as forward does.
  void queueStep(int32_t token, const LogitsReduction& reduce);
  // Queues the decode step of the token the last step's greedy reduction chose, or its
  // draw drew, on the device (no other sequence's step on the backend since), which the
  // host has not read yet (reduce: Sampler::reductionOfChosen, greedy (k = 1) or with a
  // draw: Sampler::withDraw); replayed or recorded as one graph. False where it cannot
  // be (decodesAhead, the last step neither greedy nor drawn, the context full, two
  // steps queued, a recording refused): nothing was queued. A reply that then ends on
  // that token drops the step with truncate.
  bool queueChosenStep(const LogitsReduction& reduce);
  // Waits for the oldest queued step's candidates (k of them); returns the token its
  // reduction chose on the device (Backend::takeLogitCandidates), -1 for none.
  int32_t takeCandidates(std::vector<LogitCandidate>& best);

  int nPast() const { return n_past_; }
  int nCtx() const { return n_ctx_; }
  // Forgets cached positions from n on (keeps the shared prefix of a conversation), and
  // the candidates of queued steps there.
  // A model with recurrent layers (qwen35moe) cannot step its state back: after a
  // truncate below nPast() the next forward restores the newest state snapshot at or
  // below the kept length (a prefill of n tokens leaves one at its n - 1st, the end of
  // a chat turn's prompt but its last token, where a regenerate starts again) and
  // recomputes only the kept tokens after it (all of them where there is none).
  void truncate(int n);
  // Tokens a restore recomputed so far (recurrent layers; 0 for the others).
  int64_t recomputedTokens() const { return recomputed_tokens_; }
  void setCancelFlag(const std::atomic<bool>* cancel) { cancel_ = cancel; }
  void setRoutingObserver(std::function<void(const RoutingEvent&)> f) { on_routing_ = std::move(f); }
  // Each MoE layer computes the experts `replay` names instead of its router's
  // choice (the router still runs); null: the router's. The host then sees every
  // layer's routing, as with an observer.
  void setRoutingReplay(std::shared_ptr<const RoutingReplay> replay) { replay_ = std::move(replay); }
  // Called at the start of every batch, before its layers' events (trace recording).
  void setBatchObserver(std::function<void(const BatchEvent&)> f) { on_batch_ = std::move(f); }
  // Costs a device->host copy per layer while set; unset it for speed.
  void setHiddenObserver(std::function<void(const HiddenEvent&)> f) { on_hidden_ = std::move(f); }
  // A CPU backend for the experts the source marks on_host (cpu-experts with a GPU
  // computing): they run here, from their host copies, after the device's experts
  // of the layer are queued, so both compute at once; their outputs cross to the
  // device in one copy per layer. Null (default): every expert on `backend`.
  void setHostBackend(Backend* host);
  // Largest batch one forward step computes at once; longer prompts run in chunks.
  static constexpr int kMaxBatch = 256;

 private:
  struct Scratch;
  // The step's output: the logits rows to `logits` (at logits_offset), or where
  // `reduce` is set, the last row's best entries to `best`.
  struct Output {
    std::vector<float>& logits;
    const LogitsReduction* reduce = nullptr;
    std::vector<LogitCandidate>* best = nullptr;  // null: the candidates are queued (queueStep)
  };
  void forwardTokens(std::span<const int32_t> tokens, const Output& out, bool all_logits);
  void forwardBatch(std::span<const int32_t> tokens, const Output& out, bool all_logits,
                    size_t logits_offset);
  void computeBatch(std::span<const int32_t> tokens, int first_row, int rows);
  bool runAsGraph(const Backend::StepValues& step, std::span<const int32_t> tokens);
  // After a step that ends with `reduce`: its candidates' copy queued (queueStep).
  void queueCandidates(int k);
  bool stepStaysOnTheDevice() const;
  // Every rope the layers turn q and k by, each once (Backend::reserveRopes).
  std::vector<Backend::RopeParams> layerRopes() const;
  void attentionBlock(int il, int n);
  void latentAttentionBlock(int il, int n);  // deepseek2 (transformer_mla.cpp)
  // qwen35moe (transformer_delta.cpp): full attention gated by sigmoid(gate), and the
  // gated delta-net layers with their recurrent state.
  void gatedAttentionBlock(int il, int n);
  void deltaNetBlock(int il, int n);
  // gemma4 (transformer_gemma4.cpp): a whole layer, its attention, its two FFN branches.
  void gemma4Layer(int il, int n);
  void gemma4Attention(int il, int n);
  void gemma4Ffn(int il, int n);
  Backend::RopeParams gemma4Rope(int il) const;
  // The MoE block's input into s_->xn and the router's input (s_->xn, or gemma4's own).
  const float* moeInputs(int il, int n);
  void resetRecurrentState();
  // Brings the recurrent state to n_past_ after a truncate or a failed step: from
  // zero over history_'s tokens.
  void recomputeRecurrentState();
  void normInput(const float* weight, int n);
  void denseFfn(int il, int n);
  void moeBlock(int il, int n);
  void replayRouting(int il,
                     int n);  // the replay's choice into chosen / chosen_w (and the backend's routing)
  // The MoE block routed and computed on the backend alone (experts all in place
  // there): the host learns nothing of the routing and waits for nothing.
  void moeBlockOnDevice(int il, int n, std::span<const ExpertWeights> every_expert);
  // The MoE block of a decode step through the source's map of the layer
  // (ExpertSource::mappedExperts): routed and computed on the backend; the
  // routing is read back without a wait and handed to the source after the step.
  void moeBlockMapped(int il, std::span<const ExpertWeights> map);
  // After the step's last wait: each mapped layer's routing to the source and observers.
  void deliverMappedRouting();
  Backend::MoeExpertsCall expertsCall(int il, int n) const;
  void sharedExperts(int il, int n, float* moe_out);
  void expertsOnBackend(int il, int n, const std::vector<ExpertRef>& order,
                        const std::vector<std::vector<int>>& served);
  void expertsOneByOneOrTogether(int il, const std::vector<ExpertRef>& order,
                                 const std::vector<std::vector<int>>& served);
  void hostExperts(int il, std::span<const ExpertRef* const> refs,
                   const std::vector<std::vector<int>>& served);
  // Experts on backend_ whose tokens fit the scratch together: all their gate and
  // up projections in one matmulMany, one activation, all down projections in another.
  void expertsTogether(int il, std::span<const ExpertRef* const> refs,
                       const std::vector<std::vector<int>>& served);
  void addExpertBiases(std::span<const ExpertRef* const> refs, const std::vector<std::vector<int>>& served,
                       const std::vector<int>& first, const float* biases, float* rows, int width);
  // RoPE of n tokens' heads at positions_, YaRN-scaled where the model says so.
  void rope(float* x, int n, int n_heads);
  // The FFN activation of the model: SwiGLU, or gpt-oss's clamped SwiGLU.
  void activate(Backend& be, const float* gate, const float* up, float* out, size_t n) const;
  void addBias(float* x, const float* bias, int n_rows, int width);
  void checkCancel() const;
  void reportHidden(int index, int n);

  const Model& model_;
  const ModelConfig& cfg_;
  Backend& backend_;
  ExpertSource& experts_;
  int n_ctx_;
  // Names this sequence (its KV cache and scratch) to a backend that replays recorded steps.
  const uint64_t id_;
  int n_past_ = 0;
  std::vector<KvCache> k_cache_, v_cache_;  // per layer: [n_ctx][kv_width] (Backend::allocKv);
                                            // empty for recurrent layers
  // Recurrent layers (qwen35moe): each one's state after positions 0..n_past_-1 in
  // backend memory (null for attention layers; delta_net.h gives the layout), the
  // tokens at those positions, and whether the state is behind n_past_ (a truncate or
  // a failed step left it so).
  struct RecurrentState {
    float* conv = nullptr;   // [conv_kernel - 1][conv_channels]
    float* delta = nullptr;  // [n_v_heads][head_v][head_k]
  };
  std::vector<RecurrentState> recurrent_;
  std::vector<int32_t> history_;
  bool recurrent_stale_ = false;
  // Copies of every recurrent layer's state at a position (kRecurrentSnapshots of them,
  // allocated with the state; position -1: unused). One is kept per prefill, the oldest
  // replaced; truncating below a snapshot's position drops it.
  struct RecurrentSnapshot {
    int position = -1;
    std::vector<RecurrentState> layers;
  };
  std::vector<RecurrentSnapshot> snapshots_;
  int64_t recomputed_tokens_ = 0;
  void takeSnapshot();
  void dropSnapshotsAbove(int position);
  void copyState(const std::vector<RecurrentState>& from, const std::vector<RecurrentState>& to);
  std::unique_ptr<Scratch> s_;
  Backend* host_ = nullptr;
  struct HostScratch;
  std::unique_ptr<HostScratch> h_;  // made on first use of host_
  const std::atomic<bool>* cancel_ = nullptr;
  std::function<void(const RoutingEvent&)> on_routing_;
  std::shared_ptr<const RoutingReplay> replay_;
  std::function<void(const HiddenEvent&)> on_hidden_;
  std::function<void(const BatchEvent&)> on_batch_;
  std::vector<float> hidden_host_;
  // A block's output (in s_) not yet added to the stream x: the next norm adds it
  // (Backend::addRmsNorm), or reportHidden before it reads x.
  const float* pending_residual_ = nullptr;
  bool graphs_off_ = false;      // recording a step failed once: steps run op by op
  bool hidden_on_host_ = false;  // this MoE layer's input is in s_->host_hidden
  // The layers of this step that went through moeBlockMapped, in order, and where
  // their routing (ids then weights, as routeTopK writes them) lands on the host.
  std::vector<int> mapped_layers_;
  std::vector<std::vector<float>> mapped_routing_;  // [layer]
  std::vector<int32_t> positions_;
  // Steps whose candidates are queued to the host and not taken yet, oldest first: the
  // position of the step's token, the backend's slot, k.
  struct QueuedStep {
    int pos = 0, slot = 0, k = 0;
  };
  std::deque<QueuedStep> queued_;
  static constexpr size_t kMaxQueued = 2;
  // The last step ended with a greedy reduction or a draw: the backend holds its choice,
  // the token at n_past_ (queueChosenStep).
  bool chose_on_device_ = false;
};

}  // namespace moe
