// libFuzzer target for everything after the GGUF reader: ModelConfig, the tensor
// checks and Model::load, the tokenizer, then two forward steps of the model on the
// CPU backend. Every input must load and run, or stop with an exception (the clean
// error a user sees); ASan/UBSan (the fuzz build enables both) turn an out-of-bounds
// access, an overflow or a huge allocation into a crash. Seeds: tiny models of every
// architecture, written by fuzz_model_seeds. Build and run: docs/FUZZING.md.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "inference/backend.h"
#include "inference/model.h"
#include "inference/transformer.h"
#include "models/gguf.h"
#include "offload/resident_expert_source.h"

namespace {

// One thread: a fuzz input must run the same every time.
moe::Backend& backend() {
  static const std::unique_ptr<moe::Backend> b = moe::makeCpuBackend(1);
  return *b;
}

void runModel(const uint8_t* data, size_t size) {
  auto model =
      moe::Model::load(moe::gguf::GgufFile::fromBytes(std::vector<uint8_t>(data, data + size)), backend());
  const moe::ModelConfig& c = model->config();
  std::vector<int32_t> ids =
      model->tokenizer().encode("hello world", model->tokenizer().addBosDefault(), false);
  if (ids.empty()) ids.push_back(0);
  if (ids.size() > 4) ids.resize(4);
  moe::ResidentExpertSource experts(model->hostExperts());
  moe::Transformer t(*model, backend(), experts, 16);
  std::vector<float> logits;
  t.forward(ids, logits);
  if (logits.size() != static_cast<size_t>(c.n_vocab)) __builtin_trap();
  const int32_t next = 1 % c.n_vocab;
  t.forward({&next, 1}, logits);
  if (logits.size() != static_cast<size_t>(c.n_vocab)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    runModel(data, size);
  } catch (const std::exception&) {
    // A clean error (the file is refused with a message); anything else crashes.
  }
  return 0;
}
