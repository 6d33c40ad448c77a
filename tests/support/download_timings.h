// DownloadManager timings for tests: retries and progress reports every 20 ms
// instead of seconds, so failure paths run fast. Tests that need more (stall
// detection, persisting) set those fields on top. The link's idle clock stands
// still: a pause of a busy machine is never taken for a stall (the stall test
// moves a clock of its own).
#pragma once

#include "app/qt/download_manager.h"

namespace moe::test {

inline DownloadTimings quickDownloadTimings() {
  DownloadTimings t;
  t.backoff_first_ms = 20;
  t.progress_ms = 20;
  t.idle_clock_ms = [] { return qint64{0}; };
  return t;
}

}  // namespace moe::test
