// CudaBackend: a decode step recorded once as a CUDA graph and replayed at later
// positions (Backend::beginStepCapture, replayStep): the step's token and position in
// device memory, the rope table of every position, the decode attention's plan.
#include <algorithm>
#include <cstring>
#include <vector>

#include "inference/cuda/cuda_backend.h"
#include "inference/cuda/cuda_backend_internal.h"
#include "inference/cuda/cuda_check.h"
#include "inference/rope_angles.h"

namespace moe {

// ---------------------------------------------------------------------------
// Decode steps as graphs

// A step that waits once will wait again: steps run op by op from then on.
void CudaBackend::refuseWhileCapturing(const char* what) {
  if (!capturing_) return;
  graphs_failed_ = true;
  throw StepCaptureFailed(std::string("a recorded step cannot wait for the device: ") + what);
}

void CudaBackend::reserveStepValues() {
  if (!step_host_)
    step_host_ = static_cast<int32_t*>(cudaHostAllocOrThrow(2 * sizeof(int32_t), "step values"));
  scratch(step_dev_, 2 * sizeof(int32_t), "step values");
}

void CudaBackend::reserveStepState(const ModelConfig& c, int n_ctx) {
  reserveStepValues();
  if (c.n_rot <= 0 || n_ctx <= 0) return;
  const RopeYarn* yarn = c.yarn.active() ? &c.yarn : nullptr;
  const RopeYarn key = yarn ? *yarn : RopeYarn{};
  const bool same =
      rope_all_n_rot_ == c.n_rot && rope_all_base_ == c.rope_freq_base && rope_all_yarn_ == bool(yarn) &&
      (!yarn ||
       (key.factor == rope_all_yarn_key_.factor && key.orig_ctx == rope_all_yarn_key_.orig_ctx &&
        key.beta_fast == rope_all_yarn_key_.beta_fast && key.beta_slow == rope_all_yarn_key_.beta_slow &&
        key.attn_factor == rope_all_yarn_key_.attn_factor));
  if (same && rope_all_rows_ >= n_ctx) return;
  std::vector<float> table(size_t(n_ctx) * c.n_rot);
  for (int p = 0; p < n_ctx; ++p)
    ropeAngles(p, c.n_rot, c.rope_freq_base, yarn, table.data() + size_t(p) * c.n_rot);
  void* dev = scratch(rope_all_, table.size() * sizeof(float), "rope table of every position");
  synchronize();  // queued steps may read the old rows
  rope_all_rows_ = 0;
  checkCuda(cudaMemcpy(dev, table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice),
            "rope table upload");
  rope_all_rows_ = n_ctx;
  rope_all_n_rot_ = c.n_rot;
  rope_all_base_ = c.rope_freq_base;
  rope_all_yarn_ = bool(yarn);
  rope_all_yarn_key_ = key;
  ++buffers_generation_;
}

int CudaBackend::planKeys(int pos0, int n_tokens) const {
  const int keys = pos0 + n_tokens;
  const int rounded = (keys + kPlanKeys - 1) / kPlanKeys * kPlanKeys;
  return std::max(keys, std::min(rounded, n_ctx_));
}

const int32_t* CudaBackend::recordedPosition(int pos, int n_tokens, const char* what) {
  if (n_tokens != 1 || pos != step_.pos) {
    graphs_failed_ = true;
    throw StepCaptureFailed(std::string("a recorded step is one token at the step's position: ") + what);
  }
  return static_cast<const int32_t*>(step_dev_.ptr) + 1;
}

// The last step's graph has read step_host_ (in practice long ago: its logits were
// read back since).
void CudaBackend::waitForStepValues() {
  const cudaError_t done = cudaEventQuery(step_done_);
  if (done == cudaErrorNotReady)
    checkCuda(cudaEventSynchronize(step_done_), "cuda backend: the last step's values");
  else
    checkCuda(done, "cuda backend: the last step's values");
}

// A step that ends with reduceLogits: its penalised tokens in pinned memory, where the
// graph's copy reads them (once the last step's graph is done with them).
void CudaBackend::writeStepPenalty(const LogitsReduction& r) {
  const std::vector<int32_t> values = penaltyValues(r);
  std::copy(values.begin(), values.end(), penalty_host_);
}

bool CudaBackend::beginStepCapture(const StepValues& v) {
  if (graphs_failed_ || capturing_ || v.pos < 0) return false;
  reserveStepValues();
  if (v.reduce) reservePenalty(penaltyValues(*v.reduce).size() - 2);
  waitForStepValues();
  step_host_[0] = v.token;
  step_host_[1] = v.pos;
  step_ = v;
  step_.reduce = nullptr;  // the caller's, valid during the call only
  step_reduce_k_ = v.reduce ? v.reduce->k : 0;
  step_reduce_ids_ = v.reduce ? recordedPenaltyIds(*v.reduce) : 0;
  if (v.reduce) writeStepPenalty(*v.reduce);
  step_plan_keys_ = planKeys(v.pos, 1);
  checkCuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  capturing_ = true;
  // The graph's first node: the step's values, read from pinned memory when it runs.
  const cudaError_t copied =
      cudaMemcpyAsync(step_dev_.ptr, step_host_, 2 * sizeof(int32_t), cudaMemcpyHostToDevice, stream_);
  if (copied != cudaSuccess) {
    abortStepCapture();
    graphs_failed_ = true;
    return false;
  }
  return true;
}

void CudaBackend::endStepCapture() {
  if (!capturing_) return;
  capturing_ = false;
  recorded_.valid = false;
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(stream_, &graph) != cudaSuccess || !graph) {
    cudaGetLastError();
    graphs_failed_ = true;
    forgetUploads();
    throw StepCaptureFailed("cuda backend: recording the step failed");
  }
  // The same shape as the last recording (the usual case): its executable graph takes
  // the new arguments; else a new one.
  if (step_graph_) {
    cudaGraphExecUpdateResultInfo info{};
    if (cudaGraphExecUpdate(step_graph_, graph, &info) != cudaSuccess) {
      cudaGetLastError();
      cudaGraphExecDestroy(step_graph_);
      step_graph_ = nullptr;
    }
  }
  cudaError_t made = cudaSuccess;
  if (!step_graph_) made = cudaGraphInstantiate(&step_graph_, graph, 0);
  cudaGraphDestroy(graph);
  if (made != cudaSuccess) {
    cudaGetLastError();
    step_graph_ = nullptr;
    graphs_failed_ = true;
    forgetUploads();
    throw StepCaptureFailed("cuda backend: instantiating the step's graph failed");
  }
  checkCuda(cudaGraphLaunch(step_graph_, stream_), "cudaGraphLaunch");
  checkCuda(cudaEventRecord(step_done_, stream_), "cudaEventRecord");
  ++step_graph_launches_;
  recorded_ = {true, step_.owner, buffers_generation_, step_plan_keys_, step_reduce_k_, step_reduce_ids_};
}

bool CudaBackend::replayStep(const StepValues& v) {
  if (!recorded_.valid || graphs_failed_ || capturing_ || !step_graph_ || v.owner != recorded_.owner ||
      recorded_.buffers != buffers_generation_ || v.pos < 0 || planKeys(v.pos, 1) != recorded_.plan_keys ||
      v.pos >= rope_all_rows_ || (v.reduce ? v.reduce->k : 0) != recorded_.reduce_k ||
      (v.reduce && penaltyValues(*v.reduce).size() - 2 > size_t(recorded_.reduce_ids)))
    return false;
  waitForStepValues();
  step_host_[0] = v.token;
  step_host_[1] = v.pos;
  if (v.reduce) {
    writeStepPenalty(*v.reduce);
    top_k_ = recorded_.reduce_k;
  }
  checkCuda(cudaGraphLaunch(step_graph_, stream_), "cudaGraphLaunch");
  checkCuda(cudaEventRecord(step_done_, stream_), "cudaEventRecord");
  ++step_graph_launches_;
  return true;
}

void CudaBackend::abortStepCapture() noexcept {
  if (!capturing_) return;
  capturing_ = false;
  recorded_.valid = false;
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(stream_, &graph);
  if (graph) cudaGraphDestroy(graph);
  cudaGetLastError();  // a broken capture's error is not the next call's
  forgetUploads();
}

void CudaBackend::forgetUploads() {
  rope_positions_.clear();
  for (auto& [host, bias] : selection_biases_) bias.values.clear();
  std::fill(layer_experts_host_.begin(), layer_experts_host_.end(), nullptr);
}

}  // namespace moe
