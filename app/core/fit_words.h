// What fits where, in the words every view of the app uses (the settings panel,
// the model wizard's catalog and the models view), so one model never reads two
// ways. Qt-free; the numbers come from offload/fit_estimate.
#pragma once

#include <cstdint>
#include <string>

#include "offload/fit_estimate.h"

namespace moe {

// "24.00 GB", "15.7 MB", "512.0 KB", "12 B" (decimal units, as drives and cards are sold).
std::string formatBytes(uint64_t bytes);

// What stays on the GPU whatever the budget: non-expert weights, KV cache, recurrent
// state, workspace.
inline uint64_t fixedGpuBytes(const FitEstimate& f) { return f.fixedBytes(); }

// Why a model does not fit the budget, in one sentence (empty when it fits): the
// fixed needs above the budget, or too little left for the two staging slots.
std::string whyItDoesNotFit(const FitEstimate& fit);

// A table cell: "yes, every expert on the GPU", "yes, 45% of experts cached",
// "no: needs 3.10 GB before any expert".
std::string fitShort(const FitEstimate& fit);

// Several lines: what stays on the GPU, the expert cache, the pinned host RAM
// against host_available (MemAvailable; 0 = unknown).
std::string fitSummary(const FitEstimate& fit, uint64_t host_available);

// MemAvailable of this machine (0 = unknown).
uint64_t availableHostRam();

}  // namespace moe
