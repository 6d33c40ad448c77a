#include "offload/cached_expert_source.h"

namespace moe {

CachedExpertSource::CachedExpertSource(const HostExpertStore& store, ExpertCache& cache,
                                       TransferWorker& worker, int n_expert_used, PrefetchOptions prefetch)
    : store_(store),
      cache_(cache),
      worker_(worker),
      prefetch_(prefetch),
      budget_(prefetch.budget > 0 ? prefetch.budget : 2 * n_expert_used),
      from_host_(store.experts(), 0) {}

void CachedExpertSource::onLayerInput(int layer, std::span<const float> hidden, int n_tokens) {
  if (!prefetch_.predictor) return;
  const int target = layer + prefetch_.stride;
  if (!store_.hasLayer(target)) return;
  const auto predicted = prefetch_.predictor->predict(layer, target, hidden, n_tokens, budget_);
  if (!predicted.empty()) worker_.pushPredicted(target, predicted);
}

std::vector<ExpertRef> CachedExpertSource::acquire(int layer, std::span<const int> experts) {
  const ExecutionOrder order = worker_.pushPrecise(layer, experts);
  std::vector<ExpertRef> refs;
  refs.reserve(order.size());
  for (const OrderedExpert& o : order) {
    const bool host = o.residency == Residency::kUnavailable;
    from_host_.at(o.expert) = host;
    const uint8_t* base = host ? store_.expertData(layer, o.expert) : cache_.slotData(o.slot);
    refs.push_back({o.expert, store_.viewAt(layer, base)});
    host_computed_ += host;
  }
  return refs;
}

void CachedExpertSource::waitFor(int layer, const ExpertRef& ref) {
  if (!from_host_.at(ref.expert)) worker_.waitReady(layer, ref.expert);
}

void CachedExpertSource::release(int layer) { worker_.release(layer); }

}  // namespace moe
