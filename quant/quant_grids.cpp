// The lattice tables of the grid-coded IQ types: each entry packs one group of 8
// (IQ2_*, IQ1_*) or 4 (IQ3_*) element magnitudes, one per byte, lowest byte first.
// They are part of the formats' definition: the values are those of ggml's
// ggml-common.h (MIT; iq2xxs_grid, iq2xs_grid, iq2s_grid, iq3xxs_grid, iq3s_grid,
// iq1s_grid), checked entry by entry against llama.cpp's own dequantisation
// (docs/ENGINE.md "Grid quant types") and by their shapes in tests/engine/test_quant_grids.cpp.
// The entries are in quant/grids/*.inc, which the CUDA kernels include too.
#include "quant/quant_grids.h"

namespace moe::quant::grids {

const uint64_t kIq2xxsGrid[256] = {
#include "quant/grids/iq2xxs.inc"
};

const uint64_t kIq2xsGrid[512] = {
#include "quant/grids/iq2xs.inc"
};

const uint64_t kIq2sGrid[1024] = {
#include "quant/grids/iq2s.inc"
};

const uint32_t kIq3xxsGrid[256] = {
#include "quant/grids/iq3xxs.inc"
};

const uint32_t kIq3sGrid[512] = {
#include "quant/grids/iq3s.inc"
};

const uint64_t kIq1sGrid[2048] = {
#include "quant/grids/iq1s.inc"
};

}  // namespace moe::quant::grids
