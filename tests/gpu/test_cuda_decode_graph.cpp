// A resident decode step is one CUDA graph for every architecture the engine runs:
// on the stand-in's counters, each greedy decode step of each tiny synthetic model is
// 1 graph launch, 0 kernels launched one by one, 1 host wait (the argmax) and 0
// stream waits, recorded at the first step only; every step's logits are the bits
// of the same step run op by op (a host-routed source, which is never recorded), and
// the greedy tokens are the CPU backend's. gemma4's global layers turn by frequency
// factors (rope_freqs): their table of every position is made once at load
// (Backend::reserveRopes), so their step records too.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "inference/backend.h"
#include "inference/backend_factory.h"
#include "inference/cpu/cpu_backend.h"
#include "inference/model.h"
#include "inference/transformer.h"
#include "models/gguf.h"
#include "offload/resident_expert_source.h"
#include "support/gpu_suite.h"
#include "support/host_routed_source.h"
#include "support/test_log.h"
#include "synth/synthetic_model.h"

#if MOECHAT_CUDA_STANDIN
#include "cuda_standin.h"
#endif

namespace {

class CudaDecodeGraph : public moe::test::GpuTest {
 protected:
  static void SetUpTestSuite() {
    if (!moe::test::noCudaReason().empty()) return;  // each case skips (GpuTest)
    gpu_ = moe::makeBackend(moe::DeviceChoice::kCuda, 2);
  }
  static void TearDownTestSuite() { gpu_.reset(); }
  static inline std::unique_ptr<moe::Backend> gpu_;
};

int32_t argmax(const std::vector<float>& logits) {
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

#if MOECHAT_CUDA_STANDIN
TEST_F(CudaDecodeGraph, everyArchitectureDecodesAsOneGraph) {
  const char* archs[] = {"llama",   "qwen2moe", "qwen3moe",  "deepseek2",  "olmoe",
                         "glm4moe", "gpt-oss",  "qwen35moe", "minimax-m2", "gemma4"};
  for (const char* arch : archs) {
    if (moe::test::gpuTestsQuick() && std::string(arch) != "gemma4") continue;  // the same graph threads
    const auto bytes = moe::synth::buildModel(moe::synth::tinySpec(arch)).toBytes();
    auto model = moe::Model::load(moe::gguf::GgufFile::fromBytes(bytes), *gpu_);
    const auto table = moe::prepareExperts(*gpu_, model->hostExperts());
    moe::ResidentExpertSource resident(table);
    moe::test::HostRoutedSource host_routed(resident);
    moe::Transformer on_device(*model, *gpu_, resident, 64), op_by_op(*model, *gpu_, host_routed, 64);
    // The CPU reference, with the GPU's F16 KV cache.
    moe::CpuBackend cpu(2);
    cpu.setKvType(moe::KvType::F16);
    auto cpu_model = moe::Model::load(moe::gguf::GgufFile::fromBytes(bytes), cpu);
    moe::ResidentExpertSource cpu_experts(cpu_model->hostExperts());
    moe::Transformer on_cpu(*cpu_model, cpu, cpu_experts, 64);

    std::vector<float> logits, logits_op, logits_cpu;
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7};
    on_device.forward(prompt, logits);
    op_by_op.forward(prompt, logits_op);
    on_cpu.forward(prompt, logits_cpu);
    ASSERT_TRUE(logits == logits_op) << arch << ": the prompt's logits differ";
    int32_t next = argmax(logits);
    ASSERT_EQ(next, argmax(logits_cpu)) << arch << ": the prompt's greedy token is not the CPU's";
    // Recurrent layers run the prompt's last token as a step of its own (the state's
    // snapshot comes before it): recorded there, replayed from the first decode step.
    const bool recorded_in_prompt = model->config().hasRecurrentLayers();
    for (int step = 0; step < 5; ++step) {
      gpu_->synchronize();
      const auto before = cudastandin::totals().all;
      on_device.forward(std::span(&next, 1), logits);
      const auto after = cudastandin::totals().all;
      op_by_op.forward(std::span(&next, 1), logits_op);
      on_cpu.forward(std::span(&next, 1), logits_cpu);
      const uint64_t graphs = after.graph_launches - before.graph_launches;
      const uint64_t kernels = after.kernel_launches - before.kernel_launches;
      const uint64_t host_waits = after.host_syncs - before.host_syncs;
      const uint64_t stream_waits = after.stream_syncs - before.stream_syncs;
      const uint64_t recorded = after.captured_kernels - before.captured_kernels;
      moe::test::info(
          "%-10s step %d: %llu graph launches (%llu kernels recorded), %llu kernels one by one, "
          "%llu host waits, %llu stream waits",
          arch, step, (unsigned long long)graphs, (unsigned long long)recorded, (unsigned long long)kernels,
          (unsigned long long)host_waits, (unsigned long long)stream_waits);
      EXPECT_EQ(graphs, 1u) << arch << " step " << step << ": the step is not one graph";
      EXPECT_EQ(kernels, 0u) << arch << " step " << step << ": kernels launched one by one";
      EXPECT_EQ(host_waits, 1u) << arch << " step " << step << ": waits besides the logits";
      EXPECT_EQ(stream_waits, 0u) << arch << " step " << step;
      if (step == 0 && !recorded_in_prompt)
        EXPECT_GT(recorded, 0u) << arch << ": nothing recorded";
      else
        EXPECT_EQ(recorded, 0u) << arch << " step " << step << ": recorded again";
      ASSERT_TRUE(logits == logits_op)
          << arch << " step " << step << ": logits differ from the op-by-op step";
      next = argmax(logits);
      ASSERT_EQ(next, argmax(logits_cpu)) << arch << " step " << step << ": greedy token is not the CPU's";
    }
  }
}
#endif

}  // namespace
