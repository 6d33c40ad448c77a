#include "runtime/runtime.h"

#include "inference/cpu/cpu_backend.h"
#include "offload/routing/trace_routing.h"
#include "synth/synthetic_model.h"

namespace moe {

Compute::Compute(const ComputeOptions& options)
    : owned_(makeBackend(options.device, options.threads)),
      backend_(owned_.get()),
      threads_(options.threads) {
  if (auto* cpu = dynamic_cast<CpuBackend*>(backend_); cpu && options.kv_f16) cpu->setKvType(KvType::F16);
}

Compute::Compute(Backend& backend, int threads) : backend_(&backend), threads_(threads) {}

std::shared_ptr<OffloadDevice> Compute::offloadDevice() {
  if (device() == Device::kCpu) return nullptr;
  if (!device_) device_ = makeOffloadDevice(*backend_);
  return device_;
}

Backend* Compute::hostBackend() {
  if (device() == Device::kCpu) return nullptr;
  if (!host_backend_) host_backend_ = makeCpuBackend(threads_);
  return host_backend_.get();
}

namespace {

// A synthetic file written with `gen-model --routing realistic` routes as the
// shipped profile says; any other value of the key is refused by name.
std::shared_ptr<const RoutingReplay> routingTheFileAsksFor(const Model& model) {
  const auto value = model.file().getString(synth::kRoutingKey);
  if (!value) return nullptr;
  if (*value != synth::kRealisticRouting)
    throw ModelError(std::string(synth::kRoutingKey) + " is '" + *value +
                     "'; the one routing moechat knows is '" + synth::kRealisticRouting + "'");
  return realisticRouting(model.config());
}

}  // namespace

Runtime::Runtime(const Model& model, Compute& compute, OffloadConfig config)
    : model_(model), compute_(compute), file_routing_(routingTheFileAsksFor(model)) {
  const bool resident = config.policy == OffloadPolicy::kResident;
  if (compute.device() != Device::kCpu && !resident) {
    if (!config.device) config.device = compute.offloadDevice();
    host_ = compute.hostBackend();
  }
  // Resident: the engine prepares every expert for the compute backend itself.
  engine_ = std::make_unique<OffloadEngine>(model, host_ ? *host_ : compute.backend(), std::move(config));
}

Runtime::~Runtime() = default;

std::unique_ptr<Transformer> Runtime::makeTransformer(int n_ctx, ExpertSource* wrapper) {
  auto t = std::make_unique<Transformer>(model_, compute_.backend(), wrapper ? *wrapper : source(), n_ctx);
  if (host_) t->setHostBackend(host_);
  if (file_routing_) t->setRoutingReplay(file_routing_);
  return t;
}

}  // namespace moe
