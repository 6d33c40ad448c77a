// Whole synthetic models with block-quantised weights (the K-quants, and the types
// of K-quant mixes and gpt-oss: Q4_1, Q5_0, Q5_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, MXFP4)
// on the CPU backend.
// The logits must be bit-identical with any thread count and on every instruction
// set of the dot kernels (quant/quant_dot.h defines one summation for all). Each
// model is compared with a copy of itself whose quantised tensors are stored as F32
// holding their dequantised values: the only difference left is that the quantised
// matmuls quantise their activations to 8 bits, which must stay small. A last check
// compares with the unquantised (F16/F32) model, to show the quantised weights are
// really used and land close to the original.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "inference/cpu/cpu_backend.h"
#include "models/gguf.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "support/engine_fixture.h"
#include "support/test_log.h"
#include "synth/synthetic_model.h"

using namespace moe;
using gguf::TensorType;

namespace {

// relMaxDiff of the logits against the dequantised F32 model: the 8-bit activations'
// whole cost through a model; measured 0.0057 (llama), 0.0112 (qwen2moe), 0.0105 (deepseek).
constexpr double kActivationBound = 0.03;

bool isBlockQuantised(TensorType t) {
  return t != TensorType::F32 && t != TensorType::F16 && t != TensorType::BF16;
}

// The GGUF bytes of `src` with every block-quantised tensor dequantised and stored as F32.
std::vector<uint8_t> dequantisedCopy(const gguf::GgufFile& src, int* converted) {
  gguf::GgufWriter w;
  for (const auto& kv : src.metadata())
    if (kv.key != "general.alignment") w.setValue(kv.key, kv.value);
  *converted = 0;
  for (const auto& t : src.tensors()) {
    const auto d = src.tensorData(t);
    if (!isBlockQuantised(t.type)) {
      w.addTensor(t.name, t.dims, t.type, std::vector<uint8_t>(d.begin(), d.end()));
      continue;
    }
    const uint64_t ne0 = t.dims[0], rows = t.nElements() / ne0, rb = t.rowBytes();
    std::vector<float> f(t.nElements());  // [rows][ne0]
    for (uint64_t r = 0; r < rows; ++r)
      quant::dequantizeRow(t.type, d.data() + r * rb, f.data() + r * ne0, int64_t(ne0));
    std::vector<uint8_t> bytes(f.size() * sizeof(float));
    std::memcpy(bytes.data(), f.data(), bytes.size());
    w.addTensor(t.name, t.dims, TensorType::F32, std::move(bytes));
    ++*converted;
  }
  return w.toBytes();
}

std::vector<float> logitsOf(const std::vector<uint8_t>& file, int threads, const std::vector<int32_t>& tokens,
                            quant::DotIsa isa = quant::bestDotIsa()) {
  auto backend = std::make_unique<CpuBackend>(threads);
  backend->setDotIsa(isa);
  auto model = Model::load(gguf::GgufFile::fromBytes(file), *backend);
  ResidentExpertSource experts(model->hostExperts());
  Transformer t(*model, *backend, experts, 64);
  std::vector<float> all;
  t.forward(tokens, all, true);  // prefill batch: the batched matmul path
  std::vector<float> last;
  t.forward(std::span(tokens).subspan(0, 1), last);  // continues at the next position: one-token path
  all.insert(all.end(), last.begin(), last.end());
  return all;
}

}  // namespace

namespace {

void checkLogitsMatchDequantisedF32(const std::string& arch, TensorType expert_type, TensorType weight_type,
                                    double vs_original) {
  auto spec = synth::tinySpec(arch);
  spec.expert_type = expert_type;
  spec.weight_type = weight_type;
  spec = synth::fitToBlocks(spec);
  ASSERT_EQ(spec.n_embd % int(gguf::typeTraits(uint32_t(spec.expert_type))->block_elems), 0);
  const auto kfile = synth::buildModel(spec).toBytes();
  int converted = 0;
  const auto ffile = dequantisedCopy(gguf::GgufFile::fromBytes(kfile), &converted);
  ASSERT_TRUE(converted >= 3 * spec.n_layer);  // at least the expert tensors of every layer

  const std::vector<int32_t> tokens = {1, 17, 42, 5, 99, 23, 8};
  const auto k1 = logitsOf(kfile, 1, tokens);
  const auto k3 = logitsOf(kfile, 3, tokens);
  const auto kp = logitsOf(kfile, 2, tokens, quant::DotIsa::Portable);
  const auto f1 = logitsOf(ffile, 1, tokens);
  ASSERT_TRUE(!k1.empty());
  ASSERT_EQ(k1.size(), f1.size());
  for (size_t i = 0; i < k1.size(); ++i) {
    ASSERT_EQ(k3[i], k1[i]);  // thread count changes nothing
    ASSERT_EQ(kp[i], k1[i]);  // nor the instruction set
  }
  // Against the dequantised F32 model only the 8-bit activations differ.
  const double vs_f32 = relMaxDiff(k1, f1);
  moe::test::info("%s: max |logit - dequantised F32 model| / max = %.5f", arch.c_str(), vs_f32);
  ASSERT_TRUE(vs_f32 > 0.0) << "activations were not quantised";
  ASSERT_TRUE(vs_f32 < kActivationBound) << moe::test::format("%g", vs_f32);

  // The same spec unquantised (quantised tensors generated as F32 from the same
  // random values): the quantisation must show, and stay small.
  auto plain = spec;
  plain.expert_type = TensorType::F32;
  plain.weight_type = TensorType::F32;
  const auto pfile = synth::buildModel(plain).toBytes();
  const auto p1 = logitsOf(pfile, 1, tokens);
  const double diff = relMaxDiff(k1, p1);
  moe::test::info("%s: max |logit - unquantised| / max |unquantised| = %.4f", arch.c_str(), diff);
  ASSERT_TRUE(diff > 0.0)
      << "quantised and unquantised logits are identical: the quantised weights were not used";
  ASSERT_TRUE(diff < vs_original) << moe::test::format("%g", diff);
}

}  // namespace

TEST(QuantModel, logitsMatchDequantisedF32) {
  const struct {
    const char* name;
    const char* arch;
    TensorType expert_type;
    TensorType weight_type;
    // Bound on relMaxDiff against the unquantised model; measured 0.042, 0.035,
    // 0.122 (Q4_K embeddings, attention and output as well as Q6_K experts), 0.135,
    // 0.129, 0.355 (Q2_K and Q3_K everywhere: what 2-3 bits cost), 0.074, 0.058.
    double vs_original;
  } rows[] = {
      {"llama q4_k experts", "llama", TensorType::Q4_K, TensorType::F16, 0.1},
      {"qwen2moe q5_k experts, q6_k weights", "qwen2moe", TensorType::Q5_K, TensorType::Q6_K, 0.1},
      {"deepseek q6_k experts, q4_k weights", "deepseek", TensorType::Q6_K, TensorType::Q4_K, 0.25},
      {"qwen3moe mxfp4 experts, q8_0 weights", "qwen3moe", TensorType::MXFP4, TensorType::Q8_0, 0.25},
      {"olmoe iq4_xs experts, iq4_nl weights", "olmoe", TensorType::IQ4_XS, TensorType::IQ4_NL, 0.25},
      {"llama q2_k experts, q3_k weights", "llama", TensorType::Q2_K, TensorType::Q3_K, 0.5},
      {"qwen2moe q5_0 experts, q5_1 weights", "qwen2moe", TensorType::Q5_0, TensorType::Q5_1, 0.1},
      {"llama q4_1 experts, q8_0 weights", "llama", TensorType::Q4_1, TensorType::Q8_0, 0.1},
      // The grid-coded types of the low-bit files, as those files mix them; against the
      // unquantised model measured 0.488, 0.295, 0.441, 0.279, 0.265 (1-3 bits).
      {"qwen3moe iq2_xxs experts, q4_k weights", "qwen3moe", TensorType::IQ2_XXS, TensorType::Q4_K, 0.75},
      {"olmoe iq3_s experts, iq3_xxs weights", "olmoe", TensorType::IQ3_S, TensorType::IQ3_XXS, 0.5},
      {"llama iq2_s experts, iq2_xs weights", "llama", TensorType::IQ2_S, TensorType::IQ2_XS, 0.7},
      {"qwen2moe iq1_m experts, q8_0 weights", "qwen2moe", TensorType::IQ1_M, TensorType::Q8_0, 0.5},
      {"deepseek iq1_s experts, q6_k weights", "deepseek", TensorType::IQ1_S, TensorType::Q6_K, 0.5},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    checkLogitsMatchDequantisedF32(row.arch, row.expert_type, row.weight_type, row.vs_original);
  }
}

// Loaded to run, the CPU backend repacks Q4_0 matrices into interleaved row groups;
// loaded to be described (`info`, the app's model list) nothing is repacked or
// uploaded: the weights stay in the file.
TEST(QuantModel, describingPreparesNoWeights) {
  auto spec = synth::tinySpec("qwen3moe");
  spec.expert_type = spec.weight_type = TensorType::Q4_0;
  spec = synth::fitToBlocks(spec);
  const auto bytes = synth::buildModel(spec).toBytes();
  CpuBackend backend(1);
  const auto run = Model::load(gguf::GgufFile::fromBytes(bytes), backend);
  const auto described = Model::load(gguf::GgufFile::fromBytes(bytes), backend, Model::Purpose::Describe);
  const WeightView& ran = run->weights().layers[0].wq;
  const WeightView& seen = described->weights().layers[0].wq;
  ASSERT_TRUE(ran.interleaved())
      << "the run's Q4_0 matrix was expected repacked (the check would say nothing)";
  ASSERT_TRUE(!seen.interleaved());
  const auto* t = described->file().findTensor("blk.0.attn_q.weight");
  ASSERT_TRUE(t != nullptr);
  ASSERT_EQ(static_cast<const void*>(seen.data),
            static_cast<const void*>(described->file().tensorData(*t).data()));
}
