// bench's output: one row per policy, as a table or as JSON (one object per
// policy, "policy": "reactive-lru", ...), each against reactive-lru and the bound.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "inference/cuda_library.h"
#include "inference/generator.h"
#include "offload/offload_engine.h"
#include "offload/routing/demand_cache.h"

namespace moe::cli {

struct BenchRow {
  std::string name;  // the policy, or "proactive-no-<switch>" in an ablation
  OffloadPolicy policy = OffloadPolicy::kResident;
  ProactiveSwitches switches;
  std::optional<Eviction> eviction;  // --eviction; none: the policy's own
  bool mapped_decode = false;        // --mapped-decode
  GenerationStats gen;
  OffloadSnapshot m;
  std::vector<int32_t> tokens;  // what it generated (must match across rows)
  // What the device was asked to do while the prompt ran and while the reply was
  // decoded (CudaWorkCounters; only where the CUDA runtime counts: the stand-in).
  std::optional<CudaWorkCounters> prefill_work, decode_work;
  // What the backend's matmul kernels read while the reply was decoded (a backend
  // that counts: CUDA), against the bytes of the weights they used.
  std::optional<Backend::MatmulTraffic> prefill_traffic, decode_traffic;
};

struct BenchContext {
  std::string model_name;
  int cache_slots = 0, total_experts = 0, prompt_tokens = 0, decode_tokens = 0, threads = 0;
  std::string compute = "cpu";     // the backend's name
  std::string link = "simulated";  // or "measured" (a real host->device link)
  double link_bytes_per_second = 0;
  bool paced = false;
  uint64_t bound_bytes = 0;  // every distinct expert the run used, crossing once
  uint64_t expert_bytes = 0;
  std::string routing;  // where the gates' choices came from: the router, or a trace
  // Demand caches of the same slots simulated on the same gates: the clairvoyant
  // optimum (Belady) and plain LRU with each layer its share of the slots.
  std::optional<DemandResult> belady, lru_per_layer;
  double cpu_expert_ms = 0;  // measured CPU cost of one expert, one token
  std::string predictor;
  bool timings_meaningful = true;   // false on the CPU stand-in of the CUDA runtime
  std::string decoding = "greedy";  // or "sampled: temperature ..., seed ..."
};

void printBenchTable(const std::vector<BenchRow>& rows, const BenchContext& ctx);
void printBenchJson(const std::vector<BenchRow>& rows, const BenchContext& ctx);

}  // namespace moe::cli
