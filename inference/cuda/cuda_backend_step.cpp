// CudaBackend: a decode step recorded once as a CUDA graph and replayed at later
// positions (Backend::beginStepCapture, replayStep): the step's token and position in
// device memory (copied there before each launch, or the token left there by the last
// greedy reduction or a draw), the rope table of every position, the decode attention's plan.
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

void CudaBackend::reserveStepValues() { scratch(step_dev_, 2 * sizeof(int32_t), "step values"); }

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

// A step's values, queued as plain copies before its graph through the upload ring (a
// pinned buffer per copy), so the host may queue the next step before this one has
// run: the token and position, or where the device chose the token (the last greedy
// reduction or the draw wrote it in place), the position alone; then its sampling
// values (penalised tokens, the draw's uniform).
void CudaBackend::uploadStepValues(const StepValues& v) {
  auto* dev = static_cast<int32_t*>(step_dev_.ptr);
  if (v.token_chosen_on_device) {
    upload(dev + 1, &v.pos, sizeof(int32_t), "cuda backend: step position");
  } else {
    const int32_t values[2] = {v.token, v.pos};
    upload(dev, values, sizeof values, "cuda backend: step values");
  }
  if (v.reduce) uploadPenalty(*v.reduce);
}

bool CudaBackend::beginStepCapture(const StepValues& v) {
  if (graphs_failed_ || capturing_ || v.pos < 0) return false;
  reserveStepValues();
  uploadStepValues(v);
  step_ = v;
  step_.reduce = nullptr;  // the caller's, valid during the call only
  step_reduce_k_ = v.reduce ? v.reduce->k : 0;
  step_draws_ = v.reduce && v.reduce->draw;
  step_plan_keys_ = planKeys(v.pos, 1);
  checkCuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  capturing_ = true;
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
  ++step_graph_launches_;
  recorded_ = {true, step_.owner, buffers_generation_, step_plan_keys_, step_reduce_k_, step_draws_};
}

bool CudaBackend::replayStep(const StepValues& v) {
  if (!recorded_.valid || graphs_failed_ || capturing_ || !step_graph_ || v.owner != recorded_.owner ||
      recorded_.buffers != buffers_generation_ || v.pos < 0 || planKeys(v.pos, 1) != recorded_.plan_keys ||
      v.pos >= rope_all_rows_ || (v.reduce ? v.reduce->k : 0) != recorded_.reduce_k ||
      (v.reduce && v.reduce->draw) != recorded_.draws ||
      (v.reduce && penaltyIds(*v.reduce) > penalty_ids_))  // a larger buffer: recorded anew
    return false;
  uploadStepValues(v);
  if (v.reduce) {
    top_k_ = recorded_.reduce_k;
    top_draws_ = recorded_.draws;
  }
  checkCuda(cudaGraphLaunch(step_graph_, stream_), "cudaGraphLaunch");
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
