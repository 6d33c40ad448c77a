// How much memory the machine can still give this process.
#pragma once

#include <cstdint>

namespace moe {

// MemAvailable of /proc/meminfo in bytes (free memory plus what the kernel can
// reclaim, e.g. page cache); 0 where it cannot be read.
uint64_t availableMemoryBytes();

}  // namespace moe
