// AVX-512 dot kernels: not built yet; the table is empty so the AVX2 kernels run.
#include "models/quant_dot_kernels.h"

namespace moe::quant::dot {
bool cpuHasAvx512() { return false; }
const TileTable* avx512Table(TensorType) { return nullptr; }
}  // namespace moe::quant::dot
