// The one place a run is put together: the compute backend (and, on a GPU, the
// offload device and the CPU backend for host-computed experts), the offload
// engine of a policy with its predictor, and transformers over its expert
// source. EngineSession (the app and the CLI), `moechat-cli bench` and the
// trainer's in-engine evaluation all build through here.
//
//   Compute  (once per process or session)   Runtime  (once per policy run)
//   backend, host backend, offload device -> OffloadEngine -> expert source -> Transformer
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/model.h"
#include "inference/transformer.h"
#include "offload/offload_device.h"
#include "offload/offload_engine.h"

namespace moe {

struct ComputeOptions {
  DeviceChoice device = DeviceChoice::kCpu;
  int threads = 0;      // the CPU backend's threads (on a GPU, the host backend's); <= 0: all
  bool kv_f16 = false;  // the CPU backend's KV cache in F16
};

// What computes. The model is loaded onto backend(); everything run on it shares it.
class Compute {
 public:
  // Throws like makeBackend.
  explicit Compute(const ComputeOptions& options);
  // A backend made by the caller, who keeps it alive (the trainer's evaluation).
  explicit Compute(Backend& backend, int threads = 0);
  Compute(const Compute&) = delete;
  Compute& operator=(const Compute&) = delete;

  Backend& backend() { return *backend_; }
  Device device() const { return backend_->device(); }
  // On a GPU, made on first use and then kept: the offload device (pinned store,
  // device cache, copy stream) and the CPU backend the experts the CPU rule sends
  // to the host run on. Null on the CPU.
  std::shared_ptr<OffloadDevice> offloadDevice();
  Backend* hostBackend();

 private:
  std::unique_ptr<Backend> owned_;
  Backend* backend_ = nullptr;
  int threads_ = 0;
  std::shared_ptr<OffloadDevice> device_;
  std::unique_ptr<Backend> host_backend_;
};

// One policy over a loaded model. On a GPU an offload policy caches experts in
// device memory (config.device is set here unless given) and computes the CPU
// rule's experts on the host backend; `resident` uploads every expert once. On
// the CPU the cache is host memory behind an optional simulated link.
class Runtime {
 public:
  // The model and the compute must outlive the runtime. Throws what OffloadEngine throws.
  Runtime(const Model& model, Compute& compute, OffloadConfig config);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  OffloadEngine& offload() { return *engine_; }
  const OffloadEngine& offload() const { return *engine_; }
  // What a transformer computes its experts with.
  ExpertSource& source() { return engine_->source(); }
  // A transformer over source(), or over `wrapper` (a source around source(),
  // e.g. a TraceRecorder), with the host backend set where there is one, and the
  // routing the file asks for (a synthetic file's "realistic": fileRouting()).
  std::unique_ptr<Transformer> makeTransformer(int n_ctx, ExpertSource* wrapper = nullptr);
  // The routing replacing the model's router, where the file asks for it; null otherwise.
  const std::shared_ptr<const RoutingReplay>& fileRouting() const { return file_routing_; }

 private:
  const Model& model_;
  Compute& compute_;
  Backend* host_ = nullptr;  // set on a GPU for an offload policy
  std::unique_ptr<OffloadEngine> engine_;
  std::shared_ptr<const RoutingReplay> file_routing_;
};

}  // namespace moe
