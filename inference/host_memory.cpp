#include "inference/host_memory.h"

#include <fstream>
#include <string>

namespace moe {

uint64_t availableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

}  // namespace moe
