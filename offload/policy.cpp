#include "offload/policy.h"

#include <stdexcept>

namespace moe {

namespace {
struct PolicyName {
  OffloadPolicy policy;
  const char* name;
};
constexpr PolicyName kPolicies[] = {{OffloadPolicy::kResident, "resident"},
                                    {OffloadPolicy::kReactiveLru, "reactive-lru"},
                                    {OffloadPolicy::kStatic, "static"},
                                    {OffloadPolicy::kProactive, "proactive"},
                                    {OffloadPolicy::kCpuExperts, "cpu-experts"}};

}  // namespace

const char* policyName(OffloadPolicy p) {
  for (const auto& e : kPolicies)
    if (e.policy == p) return e.name;
  return "?";
}

OffloadPolicy parsePolicy(const std::string& name) {
  for (const auto& e : kPolicies)
    if (name == e.name) return e.policy;
  std::string valid;
  for (const auto& e : kPolicies) valid += std::string(valid.empty() ? "" : ", ") + e.name;
  throw std::invalid_argument("unknown policy '" + name + "' (" + valid + ")");
}

std::vector<OffloadPolicy> allPolicies() {
  std::vector<OffloadPolicy> v;
  for (const auto& e : kPolicies) v.push_back(e.policy);
  return v;
}

PolicyParts policyParts(OffloadPolicy policy, const ProactiveSwitches& sw) {
  PolicyParts p;
  switch (policy) {
    case OffloadPolicy::kResident: break;
    case OffloadPolicy::kReactiveLru:
      p.transfer = {/*chunking=*/false, /*early_preemption=*/false, /*reordering=*/false};
      p.eviction = Eviction::kLayerLru;
      break;
    case OffloadPolicy::kStatic:
      p.transfer = {true, false, true};
      p.staging = p.stream_prefill = true;
      break;
    case OffloadPolicy::kProactive:
      p.transfer = {sw.chunking, sw.early_preemption, sw.reordering};
      p.staging = p.stream_prefill = sw.prefill_streaming;
      p.cpu_rule = sw.cpu_fallback;
      p.prefetch = sw.prefetch;
      break;
    case OffloadPolicy::kCpuExperts:
      p.transfer = {false, false, true};
      p.cpu_rule = true;
      break;
  }
  return p;
}

}  // namespace moe
