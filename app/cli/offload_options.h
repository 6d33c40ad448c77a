// Offload options shared by generate, chat and bench: the policy, the cache
// budget, the simulated link, proactive's switches; and the --stats report.
#pragma once

#include <set>
#include <string>

#include "app/cli/args.h"
#include "app/core/engine_session.h"

namespace moe::cli {

std::set<std::string> offloadValueOptions();  // --policy --cache-share --cache-mb --link-gbps --eviction
std::set<std::string> offloadFlags();         // --paced and the --no-<switch> flags

// --cache-mb (the cache's size) or else --cache-share (default `share`): the budget
// setting resolveLoadPlan turns into slots. Throws UsageError for a value out of range.
BudgetSetting cacheBudgetOption(const Args& args, double share);
// The slots of `budget` for a loaded model, as resolveLoadPlan gives them (the CPU
// as the device: a cache size or share does not depend on the GPU's memory).
// Throws UsageError when the budget holds fewer than 2 experts.
int cacheSlotsFor(const BudgetSetting& budget, const Model& model, OffloadPolicy policy);

// Reads the options above into `so` (policy default: resident). Throws UsageError.
void applyOffloadOptions(const Args& args, SessionOptions& so);
ProactiveSwitches proactiveSwitches(const Args& args);

// One line per CPU-versus-copy decision (--verbose).
void printCpuDecision(const CpuDecision& d);
// The counters at the end of a run (--stats), to stderr.
void printOffloadStats(const OffloadSnapshot& m, const EngineSession& session);

}  // namespace moe::cli
