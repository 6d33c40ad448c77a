// A load plan (app/core/load_plan.h) in the words every view of the app uses (the
// settings panel, the model wizard's catalog, the models view, the status bar after a
// load, `moechat-cli info`), so one model never reads two ways. Qt-free.
#pragma once

#include <cstdint>
#include <string>

#include "app/core/load_plan.h"

namespace moe {

// "24.00 GB", "15.7 MB", "512.0 KB", "12 B" (decimal units, as drives and cards are sold).
std::string formatBytes(uint64_t bytes);

// Why a VRAM budget holds no cache, in one sentence (resolveLoadPlan's error): the
// fixed needs above the budget, or too little left for the two staging slots.
std::string budgetShortfall(const LoadPlan& plan);

// A table cell: "yes, every expert on the GPU", "yes, 45% of experts cached",
// "runs on the CPU (no GPU)", "simulated: 50% of experts cached (no GPU)",
// "no: needs 3.10 GB before any expert".
std::string planShort(const LoadPlan& plan);

// Several lines: where the model runs, the budget (auto's, worked out), what stays on
// the GPU, the expert cache and what is left, the pinned host RAM against
// host_available (MemAvailable; 0 = unknown).
std::string planSummary(const LoadPlan& plan, uint64_t host_available);

// One line for the status bar after a load: "proactive: cache of 12 of 64 experts
// (in VRAM, copied from pinned RAM)".
std::string planNote(const LoadPlan& plan);

// The heading of a fit column for a budget on a device: "Fits 12.00 GB?", "Fits the GPU
// (auto: 10.20 GB)?", "Fits? (no GPU: runs on the CPU)".
std::string fitHeading(const BudgetSetting& budget, const DeviceMemory& device);

// What a fit is shown for, as a phrase: "a VRAM budget of 12.00 GB", "the GPU's free
// memory (auto: 10.20 GB after a 1.07 GB safety margin)", "this computer: no GPU, so
// models run on the CPU".
std::string budgetPhrase(const BudgetSetting& budget, const DeviceMemory& device);

// MemAvailable of this machine (0 = unknown).
uint64_t availableHostRam();

}  // namespace moe
