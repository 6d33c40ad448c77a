// One fixed run through an offload engine, for tests that compare engines: a
// 12-token prompt (every row's logits), then 8 decode steps, then waitIdle.
#pragma once

#include <cstdint>
#include <vector>

#include "offload/offload_engine.h"
#include "support/engine_fixture.h"

// host: the Transformer's host backend for CPU-computed experts (null: none).
inline std::vector<float> runPromptAndDecode(EngineFixture& f, moe::ExpertSource& source,
                                             moe::OffloadEngine& engine, moe::Backend* host = nullptr) {
  static const int32_t kPrompt[] = {4, 8, 15, 16, 23, 42, 7, 99, 3, 61, 12, 5};
  static const int32_t kDecode[] = {5, 77, 12, 300, 2, 31, 8, 90};
  auto t = f.transformer(64, &source);
  t->setHostBackend(host);
  std::vector<float> all, step;
  t->forward(kPrompt, step, true);
  all = step;
  for (int32_t next : kDecode) {
    const int32_t one[] = {next % f.model->config().n_vocab};
    t->forward(one, step);
    all.insert(all.end(), step.begin(), step.end());
  }
  engine.waitIdle();
  return all;
}
