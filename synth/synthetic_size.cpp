#include "synth/synthetic_model.h"

namespace moe::synth {

uint64_t plannedFileBytes(const SyntheticSpec& spec) {
  // Tensors are generated lazily, so building the writer costs only the vocabulary.
  return buildModel(spec).dataSectionBytes();
}

}  // namespace moe::synth
