// The CUDA stand-in's stream capture and graphs. A capturing stream records what
// it is asked (streams.cpp: Stream::enqueue) instead of running it; a graph is that
// list of operations, each with the arguments it was given when recorded; a launch
// queues them on a stream in order. Calls a GPU forbids while a thread captures in
// cudaStreamCaptureModeThreadLocal (a wait for the capturing stream, a device
// synchronise, an allocation, a free, a copy from or to pageable memory, a wait on
// an event recorded outside the capture) break the capture: the call fails with
// cudaErrorStreamCaptureUnsupported and cudaStreamEndCapture with
// cudaErrorStreamCaptureInvalidated. A graph update takes the new arguments when
// the operation count is the same (the stand-in does not compare node kinds).
#include "standin_device.h"

using namespace cudastandin::detail;

struct CUgraph_st {
  std::shared_ptr<CapturedGraph> recorded;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> ops;
};

namespace cudastandin::detail {

Stream*& capturingStream() {
  thread_local Stream* stream = nullptr;
  return stream;
}

cudaError_t Stream::breakCapture(const char* why) {
  if (capture && !capture->invalidated) {
    capture->invalidated = true;
    capture->why = why;
  }
  return fail(cudaErrorStreamCaptureUnsupported);
}

cudaError_t forbiddenWhileCapturing(const char* why) {
  Stream* s = capturingStream();
  return s ? s->breakCapture(why) : cudaSuccess;
}

}  // namespace cudastandin::detail

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode) {
  if (const cudaError_t s = sticky()) return s;
  if (!stream) return fail(cudaErrorStreamCaptureUnsupported);  // the legacy default stream cannot capture
  Stream& s = device().stream(stream);
  if (s.capture || capturingStream()) return fail(cudaErrorInvalidValue);
  s.capture = std::make_shared<CapturedGraph>();
  capturingStream() = &s;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (!graph) return fail(cudaErrorInvalidValue);
  *graph = nullptr;
  Stream& s = device().stream(stream);
  if (!s.capture) return fail(cudaErrorInvalidValue);
  std::shared_ptr<CapturedGraph> recorded = std::move(s.capture);
  s.capture = nullptr;
  if (capturingStream() == &s) capturingStream() = nullptr;
  if (recorded->invalidated) return fail(cudaErrorStreamCaptureInvalidated);
  *graph = new CUgraph_st{std::move(recorded)};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, enum cudaStreamCaptureStatus* status) {
  if (!status) return fail(cudaErrorInvalidValue);
  const Stream& s = device().stream(stream);
  *status = !s.capture ? cudaStreamCaptureStatusNone
                       : (s.capture->invalidated ? cudaStreamCaptureStatusInvalidated
                                                 : cudaStreamCaptureStatusActive);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!exec || !graph) return fail(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->recorded->ops};
  return cudaSuccess;
}

cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph,
                                cudaGraphExecUpdateResultInfo* info) {
  if (!exec || !graph) return fail(cudaErrorInvalidValue);
  const bool same_shape = exec->ops.size() == graph->recorded->ops.size();
  if (info)
    *info = {same_shape ? cudaGraphExecUpdateSuccess : cudaGraphExecUpdateErrorTopologyChanged, nullptr,
             nullptr};
  if (!same_shape) return fail(cudaErrorGraphExecUpdateFailure);
  exec->ops = graph->recorded->ops;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return fail(cudaErrorInvalidValue);
  if (const cudaError_t s = sticky()) return s;
  Stream& s = device().stream(stream);
  if (s.capture) return s.breakCapture("a graph launched on a capturing stream");
  s.counts.graph_launches.fetch_add(1, std::memory_order_relaxed);
  for (const auto& op : exec->ops) s.enqueue(op);
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
