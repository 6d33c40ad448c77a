#include "offload/resident_expert_source.h"

#include <stdexcept>
#include <string>

namespace moe {

ResidentExpertSource::ResidentExpertSource(const std::vector<std::vector<ExpertWeights>>& table)
    : table_(table) {}

std::vector<ExpertRef> ResidentExpertSource::acquire(int layer, std::span<const int> experts) {
  if (layer < 0 || static_cast<size_t>(layer) >= table_.size() || table_[layer].empty())
    throw std::out_of_range("no routed experts in layer " + std::to_string(layer));
  const auto& row = table_[layer];
  std::vector<ExpertRef> out;
  out.reserve(experts.size());
  for (int e : experts) {
    if (e < 0 || static_cast<size_t>(e) >= row.size())
      throw std::out_of_range("expert " + std::to_string(e) + " out of range in layer " +
                              std::to_string(layer));
    out.push_back({e, row[e]});
  }
  return out;
}

void ResidentExpertSource::release(int) {}

std::span<const ExpertWeights> ResidentExpertSource::everyExpert(int layer) const {
  if (layer < 0 || static_cast<size_t>(layer) >= table_.size()) return {};
  return table_[layer];
}

}  // namespace moe
