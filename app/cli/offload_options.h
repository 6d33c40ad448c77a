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

// Reads the options above into `so` (policy default: resident). Throws UsageError.
void applyOffloadOptions(const Args& args, SessionOptions& so);
ProactiveSwitches proactiveSwitches(const Args& args);

// One line per CPU-versus-copy decision (--verbose).
void printCpuDecision(const CpuDecision& d);
// The counters at the end of a run (--stats), to stderr.
void printOffloadStats(const OffloadSnapshot& m, const EngineSession& session);

}  // namespace moe::cli
