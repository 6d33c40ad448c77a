// The five caching policies on one page. Every policy shares the mechanics: the
// slot table (SlotTable, in the ExpertCache) says what is where, the copy queue
// (TransferWorker) moves bytes, CachedExpertSource turns a gate's choice into a
// compute order. What differs is how the copy queue moves an expert, whether the
// cache keeps staging slots, and a few decisions, made by the policy's own class
// (offload/cache_policy.h):
//
//   policy        copy queue (chunks, preemption, reorder)  staging  class (its parts)
//   resident      - (experts in place, nothing copied)       -        - (ResidentExpertSource)
//   reactive-lru  whole experts, no, no                      no       ReactiveLruPolicy
//   static        chunks, no, yes                            yes      StaticPolicy (StaticPins,
//                                                                     prefill streaming)
//   proactive     each a switch                              switch   ProactivePolicy (Prefetcher,
//                                                                     prefill streaming, CpuRule;
//                                                                     each a switch)
//   cpu-experts   whole experts, no, yes                     no       CpuExpertsPolicy (CpuRule)
//
// policyParts() is the table's copy-queue, staging and switch columns; OffloadEngine
// builds the class.
#pragma once

#include <string>
#include <vector>

#include "offload/transfer_worker.h"

namespace moe {

enum class OffloadPolicy { kResident, kReactiveLru, kStatic, kProactive, kCpuExperts };

const char* policyName(OffloadPolicy p);
// Throws std::invalid_argument naming the valid policies.
OffloadPolicy parsePolicy(const std::string& name);
std::vector<OffloadPolicy> allPolicies();

// Proactive's optimisations, one switch each (the ablation turns one off at a time).
struct ProactiveSwitches {
  bool prefetch = true;           // skip-gate prediction of layer L+stride at layer L
  bool chunking = true;           // copy gate / up / down as separate chunks
  bool early_preemption = true;   // a gate drops its layer's queued predicted chunks
  bool reordering = true;         // ready experts computed first
  bool cpu_fallback = true;       // a miss may be computed on the CPU (the cpu-experts rule)
  bool prefill_streaming = true;  // a layer past its share streams through staging slots
};

// What a policy is made of (see the table above).
struct PolicyParts {
  TransferOptions transfer;     // how the copy queue moves an expert
  bool staging = false;         // the slot table keeps two staging slots
  bool stream_prefill = false;  // a layer past its share streams through the staging slots
  bool cpu_rule = false;        // CpuRule: a miss may be computed on the CPU (where a CPU backend can)
  bool prefetch = false;        // Prefetcher: at each layer input, layer L + stride's experts ahead
};
PolicyParts policyParts(OffloadPolicy policy, const ProactiveSwitches& switches = {});

}  // namespace moe
