// The five caching policies on one page. Every policy shares the mechanics: the
// slot table (SlotTable, owned by the copy queue) says what is where, the copy queue
// (TransferWorker) moves bytes, CachedExpertSource turns a gate's choice into a
// compute order. What differs is how the copy queue moves an expert, whether the
// cache keeps staging slots, and a few decisions, made by the policy's own class
// (offload/cache_policy.h):
//
//   policy        copy queue (chunks, preemption, reorder)  staging  eviction          class (its parts)
//   resident      - (experts in place, nothing copied)       -        -                 -
//   (ResidentExpertSource) reactive-lru  whole experts, no, no                      no       layer-lru
//   ReactiveLruPolicy static        chunks, no, yes                            yes      shared-frequency
//   StaticPolicy (StaticPins,
//                                                                                       prefill streaming)
//   proactive     each a switch                              switch   shared-frequency  ProactivePolicy
//   (Prefetcher,
//                                                                                       prefill streaming,
//                                                                                       CpuRule; each a
//                                                                                       switch)
//   cpu-experts   whole experts, no, yes                     no       shared-frequency  CpuExpertsPolicy
//   (CpuRule)
//
// policyParts() is the table's copy-queue, staging, eviction and switch columns;
// OffloadEngine builds the class. The eviction column is each policy's default
// (slot_table.h; OffloadConfig::eviction overrides it): reactive-lru is the plain
// LRU cache its name says, the baseline; the others evict the expert asked for
// least, which misses less on recorded real routing (docs/offload.md, "Real routing").
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
  Eviction eviction = Eviction::kSharedFrequency;  // which cached expert a copy replaces, by default
};
PolicyParts policyParts(OffloadPolicy policy, const ProactiveSwitches& switches = {});

}  // namespace moe
