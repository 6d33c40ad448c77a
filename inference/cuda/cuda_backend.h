// The CUDA compute backend: activations, the KV cache and every non-expert weight
// in device memory, all work queued on one compute stream. Matmuls: cuBLAS
// (cublasSgemm) for F32; for the quantised types the activations are quantised
// once to 8-bit rows on the device and our dp4a matvec (cuda_matvec.cu) reads
// each weight byte once per 8 tokens; F16/BF16 use the same kernel in float for
// up to 8 tokens, and a tile of rows dequantised to F32 then cublasSgemm beyond.
// The routed experts of a MoE layer run on the device (computesMoe: cuda_moe.cu),
// routing included; the host reads back only the chosen ids and weights.
// prepareWeight uploads a weight (each call a new device copy) that lives until
// releaseWeight or the backend's end.
//
// Host pointers the interface takes (tokens, rope positions, toHost/fromHost
// buffers) are consumed before the call returns. Reads to the host go through a
// pinned buffer and wait on an event, never on the whole stream. Ops throw
// CudaError (or CudaOutOfMemory) on any failed CUDA/cuBLAS call,
// std::invalid_argument / std::out_of_range on bad input, as the CPU backend does.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "inference/backend.h"
#include "inference/cuda/cuda_kernels.h"

namespace moe {

class CudaBackend final : public Backend {
 public:
  // Uses the calling thread's current CUDA device (0 unless set). Throws CudaError
  // when no device is usable or the binary has no kernel image for it.
  CudaBackend();
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override;
  Device device() const override { return Device::kCuda; }
  bool deviceMemory(uint64_t& used, uint64_t& total) override;

  float* allocFloats(size_t n) override;  // zero-filled device memory
  void freeFloats(float* p) override;
  // The KV cache is F16 (attention reads only F16): n_elems halves in allocFloats
  // memory, freed by the default freeKv. storeKv rounds to nearest even on the device.
  KvCache allocKv(size_t n_elems) override;
  void storeKv(const KvCache& dst, size_t first, const float* src, size_t n) override;
  WeightView prepareWeight(const WeightView& host) override;
  // Every device scratch buffer at its largest for this shape, and the pinned read-back
  // and upload buffers (not the F16/BF16 dequantisation tile, sized by the weights).
  void reserveScratch(const ModelConfig& c, int max_tokens, int n_ctx) override;
  void reserveRopes(std::span<const RopeParams> ropes, int n_ctx) override;

  void embed(const WeightView& table, const int32_t* tokens, int n_tokens, float* out) override;
  void matmul(const WeightView& w, const float* x, float* y, int n_tokens) override;
  void matmulMany(std::span<const MatmulJob> jobs) override;
  void rmsNorm(const float* x, const float* weight, float* y, int n_rows, int dim, float eps) override;
  void addRmsNorm(float* x, const float* delta, const float* weight, float* y, int n_rows, int dim,
                  float eps) override;
  void ropePair(float* q, int n_head, float* k, int n_head_kv, int n_tokens, int head_dim, int n_rot,
                const int32_t* positions, float freq_base, RopeStyle style) override;
  void storeKvPair(const KvCache& k_dst, const KvCache& v_dst, size_t first, const float* k_src,
                   const float* v_src, size_t n) override;
  void rope(float* x, int n_tokens, int n_heads, int head_dim, int n_rot, const int32_t* positions,
            float freq_base, RopeStyle style) override;
  void ropeYarn(float* x, int n_tokens, int n_heads, int head_dim, int n_rot, const int32_t* positions,
                float freq_base, RopeStyle style, const RopeYarn& yarn) override;
  void attention(const float* q, const KvCache& k_cache, const KvCache& v_cache, int pos0, int n_tokens,
                 const AttentionShape& shape, float* out) override;
  void swiglu(const float* gate, const float* up, float* out, size_t n) override;
  void swigluClamped(const float* gate, const float* up, float* out, size_t n, float alpha,
                     float limit) override;
  void add(float* y, const float* x, size_t n) override;
  void axpy(float* y, const float* x, float a, size_t n) override;
  void copy(float* dst, const float* src, size_t n) override;  // dst and src must not overlap
  void copyRows(float* dst, size_t dst_stride, const float* src, size_t src_stride, size_t width,
                size_t n_rows) override;
  void zero(float* y, size_t n) override;
  void sigmoidGatedAdd(float* y, const float* x, const float* gate_logits, int n_rows, int width) override;
  // qwen35moe (cuda_backend_delta.cpp): key heads up to cuda::kMaxDeltaHeadK.
  void convSilu(const float* x, const float* weight, float* state, float* out, int n_tokens, int channels,
                int kernel) override;
  void l2NormHeads(float* x, int n_rows, size_t row_stride, int n_heads, int head_dim, float eps,
                   float scale) override;
  void deltaRule(const DeltaRuleCall& call) override;
  void gatedRmsNorm(const float* x, const float* weight, const float* gate, float* y, int n_rows, int dim,
                    float eps) override;
  void sigmoidGate(float* x, const float* gate, size_t n) override;
  // gemma4's ops (cuda_elementwise.cu; ropeFactors uploads its table each call, and
  // while a step records reads the table of every position reserveRopes made).
  void geglu(const float* gate, const float* up, float* out, size_t n) override;
  void scale(float* x, float s, size_t n) override;
  void softcap(float* x, float cap, size_t n) override;
  void ropeFactors(float* x, int n_tokens, int n_heads, int head_dim, int n_rot, const int32_t* positions,
                   float freq_base, RopeStyle style, const float* factors) override;
  void scaleRoutingWeights(float* routing, int n_tokens, int k, const float* scales) override;
  bool computesMoe() const override { return true; }
  void routeTopK(const float* logits, int n_tokens, const RoutingRule& rule, float* routing,
                 int32_t* host_ids, float* host_weights) override;
  void moeExperts(const MoeExpertsCall& call) override;
  void moeCombine(const float* outputs, const float* routing, int n_tokens, int k, int n_embd,
                  float* out) override;
  MatmulTraffic matmulTraffic() const override { return traffic_; }
  // Sampling (cuda_backend_sampling.cpp, cuda_sampling.cu): the penalised tokens are
  // uploaded (for a recorded step, before its graph); the candidates, k x 8 bytes, come
  // back through the read-back buffer, or through one of two pinned slots while the
  // next step runs. A greedy reduction leaves its argmax where the next step's embed
  // reads its token (embedsChosenToken), and a reduction that draws (LogitsReduction::
  // draw, cuda_draw.cu) its drawn token.
  int maxLogitCandidates() const override { return cuda::kMaxTopLogits; }
  void reduceLogits(const float* logits, int n_vocab, const LogitsReduction& r) override;
  void readLogitCandidates(std::span<LogitCandidate> out) override;
  void queueLogitCandidates(int slot) override;
  int32_t takeLogitCandidates(int slot, std::span<LogitCandidate> out) override;
  // Decode steps as graphs: recorded with cudaStreamCaptureModeThreadLocal, the
  // step's token and position read from device memory (step_dev_), copied there before
  // each launch (or the token left there by the last greedy reduction), so one
  // recording replays at every position its attention was planned for (kPlanKeys); a
  // new recording updates the executable graph in place when it has the same shape
  // (cudaGraphExecUpdate), else a new one.
  bool beginStepCapture(const StepValues& v) override;
  void endStepCapture() override;
  void abortStepCapture() noexcept override;
  bool replayStep(const StepValues& v) override;
  bool embedsChosenToken() const override { return true; }
  // A decode's attention is planned for its keys rounded up to a multiple of this
  // (at most the context), whether it is recorded or not: the positions of one
  // 256-key span replay one recording, and a step's bits do not depend on whether
  // it was recorded.
  static constexpr int kPlanKeys = 256;
  uint64_t stepGraphLaunches() const { return step_graph_launches_; }
  void toHost(float* host_dst, const float* src, size_t n) override;
  void toHostLater(float* host_dst, const float* src, size_t n) override;
  void fromHost(float* dst, const float* host_src, size_t n) override;
  void synchronize() override;

  // The compute stream: an expert cache's copy engine makes it wait on a slot's
  // copy events (CudaCopyLink::streamWaitFor) instead of blocking the host.
  cudaStream_t stream() const { return stream_; }
  // Frees a weight prepareWeight returned (a Model's weights otherwise stay until
  // the backend is destroyed).
  void releaseWeight(const WeightView& dev) override;
  size_t weightBytes() const { return weight_bytes_; }  // uploaded by prepareWeight

 private:
  // A device buffer that only grows; growing waits for queued work that may use it.
  struct Scratch {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  void* scratch(Scratch& s, size_t bytes, const char* what);
  // Pinned host memory for reads from the device; grows like Scratch.
  void* pinned(size_t bytes);
  // Copies n bytes of device memory to host_dst through the pinned buffer, waiting
  // on an event recorded after the copy.
  void readBack(void* host_dst, const void* src, size_t bytes);
  // Copies bytes of host memory to device memory at dst, asynchronously; src may
  // be reused when it returns.
  void upload(void* dst, const void* src, size_t bytes, const char* what);
  // Quantises x ([n_tokens][w.cols]) for weights of w's type into act_ and returns
  // what the matvec reads (x itself for float-typed weights).
  const void* activationsFor(const WeightView& w, const float* x, int n_tokens);
  void matmulQuantised(const WeightView& w, const void* act, float* y, int n_tokens);
  // Whether a matmul of n_tokens on weights of type t takes the int8 tensor-core GEMM.
  bool gemmFor(gguf::TensorType t, int n_tokens) const;
  void checkDeviceWeight(const WeightView& w, const char* op) const;
  void matmulTiled(const WeightView& w, const float* x, float* y, int n_tokens);
  void sgemm(const float* a, int64_t lda, int64_t m, const float* x, int64_t k, int n_tokens, float* y,
             int64_t ldy);
  // The cos/sin rows of `positions`; while a step records, the table of every
  // position and, in *first_row, where on the device the step's row number is.
  const float* ropeTable(const int32_t* positions, int n_tokens, int n_rot, float freq_base,
                         const RopeYarn* yarn, const int32_t** first_row);
  void reserveStepValues();
  void uploadStepValues(const StepValues& v);
  // While a step records: its position on the device, after checking that the host's
  // value (`pos`) is the step's (else the recording is refused).
  const int32_t* recordedPosition(int pos, int n_tokens, const char* what);
  int planKeys(int pos0, int n_tokens) const;
  void release() noexcept;
  const float* deviceSelectionBias(const float* host, int n);
  void freeAfterQueuedWork(void* p) noexcept;

  std::string device_name_;
  size_t device_memory_ = 0;
  bool int8_mma_ = false;  // the device has the int8 tensor-core instructions the GEMM uses
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  mutable std::mutex
      alloc_mu_;  // allocations_, weights_, device_readable_: a model may load on another thread
  std::unordered_set<float*> allocations_;
  std::unordered_map<uint8_t*, size_t> weights_;  // device copy -> bytes
  // Weight addresses found device-readable (cudaPointerGetAttributes once, not per call).
  mutable std::unordered_set<const void*> device_readable_;
  size_t weight_bytes_ = 0;
  size_t float_tile_bytes_ = 0;  // the dequantisation tile the F16/BF16 weights prepared so far need
  Scratch tokens_, rope_cs_, rope_factors_cs_, tile_, act_, moe_x_act_, moe_plan_, moe_h_act_;
  Scratch attn_;  // attention's per-chunk partials (decode)
  // Per layer the gate, up and down pointers of every expert ([n_layer][3][n_expert]),
  // for MoE calls whose experts the device's routing picks; the host's copy says
  // what was uploaded.
  Scratch layer_experts_;
  std::vector<const uint8_t*> layer_experts_host_;
  int layer_experts_width_ = 0;  // n_expert
  cuda::LayerExperts deviceLayerExperts(int layer, std::span<const ExpertWeights> experts);
  void moeLayerExperts(const MoeExpertsCall& c, cuda::MoeLaunch& m);
  size_t moePlanBytes(int n_expert, int n_slots) const;
  struct SelectionBias {
    std::vector<float> values;  // as uploaded, compared with the host values at each use
    float* device = nullptr;    // freed with the backend's other allocations
  };
  std::unordered_map<const float*, SelectionBias> selection_biases_;
  void* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  // toHostLater's copies: queued into one pinned buffer, handed to their host
  // destinations after the next wait for the stream (flushLater).
  struct LaterCopy {
    void* host_dst = nullptr;
    size_t offset = 0, bytes = 0;
  };
  void* later_ = nullptr;
  size_t later_bytes_ = 0, later_used_ = 0;
  std::vector<LaterCopy> later_copies_;
  void flushLater();
  cudaEvent_t readback_done_ = nullptr;
  struct UploadBuffer {
    void* ptr = nullptr;  // pinned
    size_t bytes = 0;
    cudaEvent_t done = nullptr;  // recorded after the buffer's last copy
    bool pending = false;
  };
  // Enough for a few decode steps that upload per layer (a mapped decode's expert
  // tables) before the first buffer comes round: the host runs ahead without waiting.
  static constexpr int kUploadRing = 256;
  static constexpr int kUploadRingSized = 4;         // sized by reserveScratch for a batch's positions
  static constexpr size_t kUploadLeastBytes = 4096;  // the others, pinned by reserveScratch
  static constexpr size_t kCublasWorkspaceBytes = size_t{4} << 20;
  UploadBuffer uploads_[kUploadRing];
  int next_upload_ = 0;
  MatmulTraffic traffic_;
  // Step capture: whether the stream records now, the executable graph, and whether
  // recording failed for good (then steps run op by op for the backend's life).
  bool capturing_ = false;
  cudaGraphExec_t step_graph_ = nullptr;
  bool graphs_failed_ = false;
  uint64_t step_graph_launches_ = 0;
  // The recorded step: its values ({token, pos} on the device), whose sequence it is,
  // the keys its attention was planned for, and the buffer generation it read (any
  // scratch buffer replaced since: it records anew).
  Scratch step_dev_;
  StepValues step_;
  int step_plan_keys_ = 0;
  struct RecordedStep {
    bool valid = false;
    uint64_t owner = 0, buffers = 0;
    int plan_keys = 0;
    int reduce_k = 0;    // its reduceLogits' k
    bool draws = false;  // and whether that reduction draws
  };
  RecordedStep recorded_;
  uint64_t buffers_generation_ = 0;
  int upload_refusals_ = 0;  // recordings refused for an upload (a third: steps stop recording)
  // Sampling: the sampling values (cuda::SamplingValues, then room for penalty_ids_
  // ids) on the device; the first pass's keys; the candidates and the drawn entry; the
  // k of the last reduction and whether it drew; while a step records, what its
  // reduction must be.
  size_t penalty_ids_ = 0;
  Scratch penalty_dev_, top_keys_, top_out_;
  int top_k_ = 0;
  bool top_draws_ = false;
  int step_reduce_k_ = 0;
  bool step_draws_ = false;
  void reservePenalty(size_t ids);
  static size_t penaltyIds(const LogitsReduction& r);
  // r's tokens as the kernels read them (cuda::launchTopLogits).
  std::vector<int32_t> penaltyValues(const LogitsReduction& r) const;
  void uploadPenalty(const LogitsReduction& r);
  // Pinned slots the candidates are queued to (queueLogitCandidates): the host reads
  // one step's while the next step runs. `done`: recorded after the slot's last copy.
  struct CandidateSlot {
    LogitCandidate* host = nullptr;  // [kMaxTopLogits + 1]: the candidates, then the drawn entry
    cudaEvent_t done = nullptr;
    int k = 0;
    bool drew = false;
  };
  static constexpr int kCandidateSlots = 2;
  CandidateSlot candidate_slots_[kCandidateSlots];
  CandidateSlot& candidateSlot(int slot);
  void reserveCandidateSlots();
  int n_ctx_ = 0;  // the longest context reserveScratch was given
  // cos/sin of every position up to rope_all_rows_, one table per rope the model's
  // layers turn by (reserveRopes): what a recorded step's rope reads at its position.
  struct PositionRope {
    int n_rot = 0;
    float base = 0.0f;
    RopeYarn yarn;               // factor 1: none
    std::vector<float> factors;  // [n_rot / 2], or empty
    Scratch table;               // [rope_all_rows_][n_rot]
  };
  std::vector<PositionRope> rope_all_;
  int rope_all_rows_ = 0;
  // The table of this rope (yarn, factors: null for none), or null where none was reserved.
  const float* positionRope(int n_rot, float base, const RopeYarn* yarn, const float* factors) const;
  // positionRope while a step records; none, or a position past it, refuses the recording.
  const float* recordedRope(int n_rot, float freq_base, const RopeYarn* yarn, const float* factors);
  void* cublas_workspace_ = nullptr;
  // Throws StepCaptureFailed when the stream records: `what` would wait for the device.
  void refuseWhileCapturing(const char* what);
  // Forgets what the host believes was uploaded (the rope table, selection biases,
  // expert tables): after a recording that never ran, they are uploaded again.
  void forgetUploads();
  // The rope table of the last call: every layer's q and k rotate by the same positions.
  std::vector<int32_t> rope_positions_;
  int rope_n_rot_ = 0;
  float rope_base_ = 0.0f;
  bool rope_yarn_ = false;
  RopeYarn rope_yarn_key_;
  std::vector<float> rope_host_, rope_factors_host_;
};

}  // namespace moe
