#include "offload/cpu_expert_cost.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <vector>

namespace moe {

double CpuExpertCost::estimate(int tokens) const {
  if (tokens <= 1) return seconds_1;
  return seconds_1 + (seconds_8 - seconds_1) * (tokens - 1) / 7.0;
}

namespace {

double timeExpert(Backend& be, const ExpertWeights& w, int tokens, int repeats) {
  const int n_embd = w.gate.cols, n_ff = w.gate.rows;
  std::vector<float> host_x(size_t(tokens) * n_embd);
  for (size_t i = 0; i < host_x.size(); ++i) host_x[i] = 0.01f * float(int(i % 97) - 48);
  float* x = be.allocFloats(host_x.size());
  float* a = be.allocFloats(size_t(tokens) * n_ff);
  float* b = be.allocFloats(size_t(tokens) * n_ff);
  float* y = be.allocFloats(size_t(tokens) * n_embd);
  be.fromHost(x, host_x.data(), host_x.size());
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    be.matmul(w.gate, x, a, tokens);
    be.matmul(w.up, x, b, tokens);
    be.swiglu(a, b, a, size_t(tokens) * n_ff);
    be.matmul(w.down, a, y, tokens);
    be.synchronize();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  for (float* p : {x, a, b, y}) be.freeFloats(p);
  return best;
}

}  // namespace

CpuExpertCost measureCpuExpertCost(Backend& cpu, const HostExpertStore& store, int repeats) {
  int layer = 0;
  while (layer < store.layers() && !store.hasLayer(layer)) ++layer;
  if (layer == store.layers() || store.experts() == 0)
    throw std::invalid_argument("measureCpuExpertCost: the model has no routed experts");
  const ExpertWeights w = store.viewAt(layer, store.expertData(layer, 0));
  CpuExpertCost c;
  c.seconds_1 = timeExpert(cpu, w, 1, repeats);
  c.seconds_8 = std::max(c.seconds_1, timeExpert(cpu, w, 8, repeats));
  return c;
}

}  // namespace moe
