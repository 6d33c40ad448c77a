// A resident source that keeps the routing on the host, as an offload policy's cache
// does: not every expert counts as in place, so each MoE layer reads its ids back and
// computes the experts the host names, and no decode step is recorded.
#pragma once

#include <span>
#include <vector>

#include "inference/expert_source.h"

namespace moe::test {

class HostRoutedSource final : public moe::ExpertSource {
 public:
  explicit HostRoutedSource(moe::ExpertSource& inner) : inner_(inner) {}
  std::vector<moe::ExpertRef> acquire(int layer, std::span<const int> experts) override {
    return inner_.acquire(layer, experts);
  }
  void release(int layer) override { inner_.release(layer); }
  bool allReady() const override { return inner_.allReady(); }
  bool wantsLayerInput() const override { return false; }

 private:
  moe::ExpertSource& inner_;
};

}  // namespace moe::test
