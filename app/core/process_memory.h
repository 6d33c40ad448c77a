// How much memory this process holds, as the system counts it.
#pragma once

#include <cstdint>

namespace moe {

// Resident set size in bytes (Linux: /proc/self/statm's second field x the page
// size): the pages in RAM now, the model file's mapped pages that were read
// included. 0 when the system does not say.
uint64_t processResidentBytes();

}  // namespace moe
