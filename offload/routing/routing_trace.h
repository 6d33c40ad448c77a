// Recorded expert choices of a real model: per token and per MoE layer, the k
// experts its router chose and their weights, no hidden states. Replayed in
// place of a model's own router (trace_routing.h), so caching, prefetching and
// copies run as they would on that model's routing.
//
// Read from three formats (loadRoutingTrace):
//  - the compact file written by saveRoutingTrace ("MOEROUTE", below);
//  - a JSON file of a gpt-oss-20b generation as published in the repository
//    AmanPriyanshu/GPT-OSS-MoE-ExpertFingerprinting (Apache-2.0): its
//    "router_data" is a list of {"token_N": {"layer_L": {"selected_experts":
//    [ids], "selected_probs": [weights]}}}, decode tokens only;
//  - a folder: every *_examples.json file under it, in path order, one sequence each.
//
// Compact layout, little-endian:
//   "MOEROUTE" u32 version, u32 n_layer, u32 n_expert, u32 k, u32 n_sequences,
//   u32 source length + bytes (where it was converted from), then per sequence:
//   u32 n_tokens, ids [n_tokens][n_layer][k] (u8, or u16 past 256 experts),
//   weights [n_tokens][n_layer][k] (bf16).
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace moe {

class RoutingTraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RoutingTrace {
  int n_layer = 0, n_expert = 0, k = 0;
  // A JSON trace does not state its expert count: n_expert is then the largest id
  // seen plus one, a lower bound (false here).
  bool n_expert_exact = true;
  std::string source;
  std::vector<uint32_t> sequence_start;  // first token of each sequence, then the token count
  std::vector<uint16_t> ids;             // [tokens][n_layer][k]
  std::vector<float> weights;            // [tokens][n_layer][k]

  int tokens() const { return sequence_start.empty() ? 0 : int(sequence_start.back()); }
  int sequences() const { return sequence_start.empty() ? 0 : int(sequence_start.size()) - 1; }
  std::span<const uint16_t> idsAt(int token, int layer) const {
    return {ids.data() + (size_t(token) * n_layer + size_t(layer)) * k, size_t(k)};
  }
  std::span<const float> weightsAt(int token, int layer) const {
    return {weights.data() + (size_t(token) * n_layer + size_t(layer)) * k, size_t(k)};
  }
  // "24 layers x 32 experts, top-4" ("at least 32 experts" for an inferred count).
  std::string shape() const;

  // Appends one sequence: ids and weights [n_tokens][n_layer][k].
  void addSequence(std::span<const uint16_t> seq_ids, std::span<const float> seq_weights);
  // The first `n` tokens only (whole sequences while they fit, then part of one).
  void truncate(int n);
};

// Any of the formats above, by what the path is; RoutingTraceError names the
// file and what is wrong with it.
RoutingTrace loadRoutingTrace(const std::string& path);
void saveRoutingTrace(const RoutingTrace& trace, const std::string& path);

// One generation in the fingerprinting JSON format (`name` for errors).
RoutingTrace parseFingerprintJson(std::string_view text, const std::string& name);
// A file's bytes, JSON (a generation) or compact, by their first character.
RoutingTrace parseRoutingTrace(const std::string& bytes, const std::string& name);

}  // namespace moe
