// The fit estimate (offload/fit_estimate.h) for a model with recurrent layers: only
// qwen35moe's full-attention layers keep KV rows; its gated delta-net layers keep a
// state of fixed size per sequence (the conv inputs carried and the delta states),
// counted once whatever the context. Checked on the tiny qwen35moe model against
// numbers worked by hand from its spec, and through `moechat-cli info --preset` on the
// full-size Qwen3.6-35B-A3B and Qwen3.5-122B-A10B shapes.
#include <gtest/gtest.h>

#include <string>

#include "app/core/fit_words.h"
#include "inference/model_config.h"
#include "models/gguf.h"
#include "offload/fit_estimate.h"
#include "support/run_program.h"
#include "synth/synthetic_model.h"

using namespace moe;

namespace {

ModelConfig tinyQwen35Config() {
  return ModelConfig::fromGguf(
      gguf::GgufFile::fromBytes(synth::buildModel(synth::tinySpec("qwen35moe")).toBytes()));
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(FitEstimate, recurrentLayersKeepStateNotKvRows) {
  const ModelConfig c = tinyQwen35Config();
  // The tiny spec: 4 layers, every second full attention; 2 kv heads of 32; delta-net
  // with 2 key heads and 4 value heads of 16, conv width 4.
  ASSERT_EQ(c.n_layer, 4);
  ASSERT_TRUE(c.isRecurrentLayer(0) && !c.isRecurrentLayer(1) && c.isRecurrentLayer(2) &&
              !c.isRecurrentLayer(3));
  ModelSizes sizes;
  sizes.expert_bytes = 1000;
  sizes.other_bytes = 50000;
  sizes.moe_layers = 4;
  const int n_ctx = 512;
  const FitEstimate f = estimateFit(c, sizes, n_ctx);
  // K and V, f16, of the 2 attention layers: 2 x 2 x 512 x (2 x 32) x 2 bytes.
  EXPECT_EQ(f.kv_bytes, 2ull * 2 * 512 * 64 * 2);
  // Per delta-net layer: conv (4 - 1) x (2 x 2 x 16 + 4 x 16) = 384 floats, delta
  // 4 x 16 x 16 = 1024 floats; 2 layers of f32, live and in each snapshot.
  EXPECT_EQ(f.recurrent_state_bytes, (1 + moe::kRecurrentSnapshots) * 2ull * (384 + 1024) * 4);
  // The state does not grow with the context; the KV rows do.
  const FitEstimate longer = estimateFit(c, sizes, 2 * n_ctx);
  EXPECT_EQ(longer.recurrent_state_bytes, f.recurrent_state_bytes);
  EXPECT_EQ(longer.kv_bytes, 2 * f.kv_bytes);
  // The state is part of what the GPU holds besides the cache, and the slots are what is left.
  EXPECT_EQ(f.fixedBytes(), f.resident_bytes + f.kv_bytes + f.recurrent_state_bytes + f.workspace_bytes);
  const DeviceMemory gpu{true, 0, 0, {}};
  const PlanRequest at_budget{BudgetSetting::vramBytes(f.fixedBytes() + 5 * sizes.expert_bytes + 999),
                              OffloadPolicy::kProactive, n_ctx, false};
  const LoadPlan budgeted = resolveLoadPlan(at_budget, ModelShape{c, sizes, 0}, gpu);
  EXPECT_EQ(budgeted.cache_slots, 5);
  EXPECT_TRUE(contains(planSummary(budgeted, 0), "recurrent state ")) << planSummary(budgeted, 0);

  // The same model read as if every layer were attention: 4 layers of rows, no state.
  ModelConfig all_attention = c;
  all_attention.recurrent.clear();
  all_attention.delta = {};
  const FitEstimate dense = estimateFit(all_attention, sizes, n_ctx);
  EXPECT_EQ(dense.kv_bytes, 2 * f.kv_bytes);
  EXPECT_EQ(dense.recurrent_state_bytes, 0u);
  ModelShape dense_shape{all_attention, sizes, 0};
  const LoadPlan dense_plan = resolveLoadPlan(at_budget, dense_shape, gpu);
  EXPECT_FALSE(contains(planSummary(dense_plan, 0), "recurrent"));
}

// The full-size shapes through `info --preset` (the layout only, no weights written).
// Qwen3.6-35B-A3B: 10 attention layers x 2 kv heads x 256 x 2 (K, V) x 2 bytes = 20 KB
// per position (40 layers would be 80 KB); 30 delta-net layers x (3 x 8192 + 32 x 128 x
// 128) floats = 65.9 MB. Qwen3.5-122B-A10B: 12 attention layers; 36 delta-net layers x
// (3 x 12288 + 64 x 128 x 128) floats = 156.3 MB.
TEST(FitEstimate, infoDescribesTheQwen35Presets) {
  struct Row {
    const char* preset;
    std::vector<std::string> want;
  };
  const Row rows[] = {
      {"Q3.6-35B",
       {"architecture:    qwen35moe", "40 (40 MoE, 0 dense) + 1 next-token-prediction layer",
        "10 full-attention layers, 30 gated delta-net layers (16 key heads, 32 value heads of 128, conv 4)",
        "256 per layer, 8 used per token, ffn 512", "ffn 512 (sigmoid-gated)", "chat template qwen35",
        "KV cache 83.89 MB (10 attention layers) + recurrent state 197.59 MB (30 delta-net layers, live + 2 "
        "snapshots)",
        // The model card: 35B, 3B active. A published Q8_0 file is 37,801,097,504 bytes.
        "35.51B in the file, 34.66B in the layers run, 2.95B active per token",
        "in q8_0 (its layout only; "
        "the weights were not written): 37.81 GB"}},
      {"Q3.5-122B",
       {"48 (48 MoE, 0 dense) + 1 next-token-prediction layer",
        "12 full-attention layers, 36 gated delta-net layers (16 key heads, 64 value heads of 128, conv 4)",
        "256 per layer, 8 used per token, ffn 1024", "recurrent state 468.91 MB (36 delta-net layers",
        "124.64B in the file, 122.11B in the layers run, 9.01B active per token"}},  // card: 122B, 10B active
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.preset);
    const auto r = test::runProgram({MOECHAT_CLI, "info", "--preset", row.preset, "--ctx", "4096"}, 600);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    for (const auto& w : row.want) EXPECT_TRUE(contains(r.out, w)) << w << "\n" << r.out;
  }
}

// gemma4: each layer's own K/V width (sliding 2 kv heads of 16, global 1 of 32), and the
// shared-KV layers (3 of 6 in the tiny spec) keep no rows of their own.
TEST(FitEstimate, gemma4CountsEachLayersOwnKvRows) {
  const ModelConfig c = ModelConfig::fromGguf(
      gguf::GgufFile::fromBytes(synth::buildModel(synth::tinySpec("gemma4")).toBytes()));
  ModelSizes sizes;
  sizes.expert_bytes = 1000;
  sizes.moe_layers = 6;
  const FitEstimate f = estimateFit(c, sizes, 512);
  // Layers 0 and 1 sliding (2 x 16 = 32 wide), layer 2 global (1 x 32 = 32): K and V, f16.
  EXPECT_EQ(f.kv_bytes, 2ull * 512 * (32 + 32 + 32) * 2);
}
