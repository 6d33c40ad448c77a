// Writes the seed corpus of fuzz_model: one small model per architecture (the
// tests' tiny specs narrowed further, so that most of a file is its metadata and
// tensor table, where mutations change the structure). Usage: fuzz_model_seeds DIR
#include <cstdio>
#include <exception>
#include <string>

#include "synth/synthetic_model.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_model_seeds DIR\n");
    return 2;
  }
  try {
    for (const std::string& arch : moe::synth::supportedArchs()) {
      moe::synth::SyntheticSpec s = moe::synth::tinySpec(arch);
      s.n_embd = 32;
      s.n_head = 2;
      s.n_head_kv = 1;
      s.head_dim = 16;
      s.n_ff_exp = 16;
      if (s.n_ff > 0) s.n_ff = 32;
      if (s.n_expert_shared > 0) s.n_ff_shexp = s.n_expert_shared * (arch == "deepseek" ? s.n_ff_exp : 16);
      s.n_expert = 4;
      s.n_expert_used = 2;
      s.n_vocab_target = 300;  // the smallest vocabularies the builders make
      s = moe::synth::fitToBlocks(s);
      const std::string path = std::string(argv[1]) + "/seed_" + arch + ".gguf";
      moe::synth::writeModel(s, path);
      std::printf("%s\n", path.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_model_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
