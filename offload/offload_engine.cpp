#include "offload/offload_engine.h"

#include <algorithm>
#include <stdexcept>

#include "inference/backend_factory.h"
#include "offload/resident_expert_source.h"
#include "offload/skip_gate_predictor.h"

namespace moe {

namespace {
int moeLayers(const HostExpertStore& store) {
  int n = 0;
  for (int il = 0; il < store.layers(); ++il) n += store.hasLayer(il);
  return n;
}
}  // namespace

int OffloadEngine::routedExperts(const Model& model) {
  const auto& c = model.config();
  int layers = 0;
  for (const auto& row : model.hostExperts()) layers += !row.empty();
  return layers * c.n_expert;
}

OffloadEngine::OffloadEngine(const Model& model, Backend& cpu, OffloadConfig config)
    : config_(std::move(config)) {
  if (config_.policy == OffloadPolicy::kResident) {
    prepared_.backend = &cpu;
    prepared_.table = prepareExperts(cpu, model.hostExperts());
    resident_ = std::make_unique<ResidentExpertSource>(prepared_.table);
    source_ = resident_.get();
    return;
  }
  if (config_.cache_slots < 2) throw std::invalid_argument("the expert cache needs at least 2 slots");
  const auto& c = model.config();
  OffloadDevice* device = config_.device.get();
  // With a device, CPU-computed experts need a CPU backend to run on (and to time).
  const bool cpu_usable = !device || cpu.device() == Device::kCpu;
  if (config_.policy == OffloadPolicy::kCpuExperts && !cpu_usable)
    throw std::invalid_argument("cpu-experts computes misses on the CPU: give the " + device->name() +
                                " offload path a CPU backend (it was given " + cpu.name() + ")");
  store_ = config_.store
               ? config_.store
               : std::make_shared<const HostExpertStore>(model, device ? device->hostAllocator() : nullptr);
  // The slots come resolved (app/core/load_plan.h): taken as they are, never clamped.
  const int slots = config_.cache_slots;
  if (slots > std::max(2, routedExperts(model)))
    throw std::invalid_argument("the expert cache has " + std::to_string(slots) + " slots for " +
                                std::to_string(routedExperts(model)) + " routed experts");
  slab_ = std::make_unique<SlotSlab>(slots, store_->expertBytes(), device ? device->slotMemory() : nullptr);
  double link_bw = 0;
  if (device) {
    link_ = &device->copyLink();
    link_bw = device->linkBytesPerSecond();
  } else {
    host_link_ = std::make_unique<HostCopyLink>(config_.link.bytes_per_second, config_.link.paced);
    link_ = host_link_.get();
    link_bw = config_.link.bytes_per_second > 0 ? config_.link.bytes_per_second : measureHostCopyBandwidth();
  }
  metrics_.link_bytes_per_second.store(link_bw);

  const PolicyParts parts = policyParts(config_.policy, config_.switches);
  SlotTable table(slots, c.n_layer, HostExpertStore::kChunks);
  if (parts.staging) table.setStagingCount(std::min(kStagingSlots, slots));
  table.setEviction(config_.eviction.value_or(parts.eviction));
  worker_ = std::make_unique<TransferWorker>(*slab_, std::move(table), *store_, *link_, metrics_,
                                             config_.mode, parts.transfer);
  if (device) worker_->setSlotFence(&device->fence());

  CpuFallbackOptions cpu_rule;
  cpu_rule.enabled = parts.cpu_rule && cpu_usable;
  if (cpu_rule.enabled) {
    cpu_rule.link_bytes_per_second = link_bw;
    cpu_rule.cost = config_.cpu_cost.seconds_1 > 0 ? config_.cpu_cost : measureCpuExpertCost(cpu, *store_);
    config_.cpu_cost = cpu_rule.cost;
    cpu_rule.on_decision = config_.on_cpu_decision;
  }
  const PolicyContext context{*store_, *worker_, metrics_, c.n_expert_used};
  std::unique_ptr<CachePolicy> policy;
  switch (config_.policy) {
    case OffloadPolicy::kStatic: policy = std::make_unique<StaticPolicy>(context); break;
    case OffloadPolicy::kCpuExperts:
      if (cpu_rule.enabled) policy = std::make_unique<CpuExpertsPolicy>(context, std::move(cpu_rule));
      break;
    case OffloadPolicy::kProactive: {
      ProactiveParts proactive;
      if (parts.prefetch) {
        predictor_ = config_.predictor ? config_.predictor : std::make_shared<SkipGatePredictor>(model);
        proactive.prefetch.predictor = predictor_.get();
        proactive.prefetch.async = device != nullptr;  // on a GPU the host thread's time is the critical path
        proactive.prefetch.stride = config_.stride > 0 ? config_.stride : (moeLayers(*store_) >= 3 ? 2 : 1);
        proactive.prefetch.admission = config_.admission;
      }
      proactive.stream_prefill = parts.stream_prefill;
      proactive.cpu = std::move(cpu_rule);
      policy = std::make_unique<ProactivePolicy>(context, std::move(proactive));
      break;
    }
    default: break;  // reactive-lru (resident never gets here)
  }
  cached_ =
      std::make_unique<CachedExpertSource>(*store_, *worker_, metrics_, c.n_expert_used, std::move(policy));
  if (device) cached_->setCopyWait(device->copyWait());
  if (device && config_.mapped_decode) cached_->setMappedDecode(true);
  source_ = cached_.get();
}

OffloadEngine::PreparedExperts::~PreparedExperts() {
  for (const auto& row : table)
    for (const ExpertWeights& e : row)
      for (const WeightView* w : {&e.gate, &e.up, &e.down})
        if (!w->empty()) backend->releaseWeight(*w);
}

OffloadEngine::~OffloadEngine() {
  // The worker references the cache, store and link: stop it first.
  cached_.reset();
  worker_.reset();
}

OffloadSnapshot OffloadEngine::snapshot() const {
  if (!worker_) return {};
  OffloadSnapshot s = metrics_.snapshot();
  s.link_seconds = link_->simulatedSeconds();
  if (CopyWait* wait = config_.device ? config_.device->copyWait() : nullptr)
    s.device_stall_ns = wait->stalledNs();
  return s;
}

std::string OffloadEngine::predictorName() const { return predictor_ ? predictor_->name() : "none"; }

void OffloadEngine::setInterrupt(const std::atomic<bool>* flag) {
  if (host_link_) host_link_->setInterrupt(flag);
}

void OffloadEngine::waitIdle() {
  if (cached_) cached_->waitPredictions();
  if (worker_) worker_->waitIdle();
}

}  // namespace moe
