// libFuzzer target for the routing-trace readers (offload/routing/routing_trace.h):
// the fingerprinting JSON and the compact file. Every input must parse or throw
// RoutingTraceError; ASan/UBSan (the fuzz build enables both) turn any
// out-of-bounds read or overflow into a crash. A trace that parses
// holds whole tokens and only ids below its expert count.
#include <cstddef>
#include <cstdint>
#include <string>

#include "offload/routing/routing_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  moe::RoutingTrace t;
  try {
    t = moe::parseRoutingTrace(bytes, "input");
  } catch (const moe::RoutingTraceError&) {
    return 0;
  }
  if (t.tokens() <= 0 || t.ids.size() != size_t(t.tokens()) * size_t(t.n_layer) * size_t(t.k))
    __builtin_trap();
  for (uint16_t id : t.ids)
    if (id >= t.n_expert) __builtin_trap();
  return 0;
}
