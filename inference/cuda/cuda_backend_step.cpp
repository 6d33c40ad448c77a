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

namespace {

bool sameYarn(const RopeYarn& a, const RopeYarn& b) {
  if (a.active() != b.active()) return false;
  return !a.active() || (a.factor == b.factor && a.orig_ctx == b.orig_ctx && a.beta_fast == b.beta_fast &&
                         a.beta_slow == b.beta_slow && a.attn_factor == b.attn_factor);
}

}  // namespace

const float* CudaBackend::positionRope(int n_rot, float base, const RopeYarn* yarn,
                                       const float* factors) const {
  // A table's YaRN is an active one (reserveRopes); ropeYarn's angles at factor 1 are
  // still not plain rope's (its attn_factor).
  if (yarn && !yarn->active()) return nullptr;
  const RopeYarn none;
  for (const PositionRope& r : rope_all_)
    if (r.n_rot == n_rot && r.base == base && sameYarn(r.yarn, yarn ? *yarn : none) &&
        r.factors.empty() == !factors &&
        (!factors || std::equal(r.factors.begin(), r.factors.end(), factors)))
      return static_cast<const float*>(r.table.ptr);
  return nullptr;
}

// While a step records: the table of every position of this rope (reserveRopes).
const float* CudaBackend::recordedRope(int n_rot, float freq_base, const RopeYarn* yarn,
                                       const float* factors) {
  const float* table = positionRope(n_rot, freq_base, yarn, factors);
  if (!table || step_.pos >= rope_all_rows_) {
    graphs_failed_ = true;
    throw StepCaptureFailed("a recorded step rotates by rope parameters it has no table of");
  }
  return table;
}

// The tables are exactly `ropes`' (another model's are freed, as its recording would
// be made anew), built on the host by the op-by-op path's own functions, so a recorded
// step's angles are the bits an unrecorded one uploads. Every table has rope_all_rows_
// rows: a longer context rebuilds them all. A rope no table can serve (odd dims,
// factors of another count, or with YaRN) gets none: its steps run op by op.
void CudaBackend::reserveRopes(std::span<const RopeParams> ropes, int n_ctx) {
  if (n_ctx <= 0) return;
  std::vector<PositionRope> kept;
  bool changed = n_ctx > rope_all_rows_;
  for (const RopeParams& p : ropes) {
    if (p.n_rot <= 0 || p.n_rot % 2 != 0 ||
        (!p.factors.empty() && (p.factors.size() != size_t(p.n_rot / 2) || p.yarn.active())))
      continue;
    const RopeYarn* yarn = p.yarn.active() ? &p.yarn : nullptr;
    const float* factors = p.factors.empty() ? nullptr : p.factors.data();
    const float* table = positionRope(p.n_rot, p.base, yarn, factors);
    auto old = std::find_if(rope_all_.begin(), rope_all_.end(),
                            [&](const PositionRope& r) { return table && r.table.ptr == table; });
    if (old != rope_all_.end()) {
      kept.push_back(std::move(*old));
      rope_all_.erase(old);
    } else if (std::none_of(kept.begin(), kept.end(), [&](const PositionRope& r) {
                 return r.n_rot == p.n_rot && r.base == p.base && sameYarn(r.yarn, p.yarn) &&
                        std::equal(r.factors.begin(), r.factors.end(), p.factors.begin(), p.factors.end());
               })) {
      kept.push_back({p.n_rot, p.base, p.yarn, {p.factors.begin(), p.factors.end()}, {}});
      changed = true;
    }
  }
  changed = changed || !rope_all_.empty();
  if (!changed) {
    rope_all_ = std::move(kept);
    return;
  }
  const int rows = std::max(n_ctx, rope_all_rows_);
  synchronize();                     // queued steps may read the old rows
  for (PositionRope& r : rope_all_)  // no longer wanted
    if (r.table.ptr) checkCuda(cudaFree(r.table.ptr), "cudaFree (rope table)");
  rope_all_ = std::move(kept);
  rope_all_rows_ = 0;
  for (PositionRope& r : rope_all_) {
    std::vector<float> table(size_t(rows) * r.n_rot);
    for (int p = 0; p < rows; ++p) {
      float* cs = table.data() + size_t(p) * r.n_rot;
      if (!r.factors.empty())
        ropeAnglesWithFactors(p, r.n_rot, r.base, r.factors.data(), cs);
      else
        ropeAngles(p, r.n_rot, r.base, r.yarn.active() ? &r.yarn : nullptr, cs);
    }
    void* dev = scratch(r.table, table.size() * sizeof(float), "rope table of every position");
    checkCuda(cudaMemcpy(dev, table.data(), table.size() * sizeof(float), cudaMemcpyHostToDevice),
              "rope table upload");
  }
  rope_all_rows_ = rows;
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
