// Download speed over a sliding window of (time, bytes) samples, and the ETA it
// implies. Fed by the download manager's progress timer; times are passed in
// (milliseconds on any monotonic clock), so the arithmetic is testable alone.
#pragma once

#include <QtGlobal>
#include <deque>

namespace moe {

class SpeedMeter {
 public:
  explicit SpeedMeter(int window_ms = 5000) : window_ms_(window_ms) {}
  void setWindow(int window_ms) { window_ms_ = window_ms; }
  void reset() { samples_.clear(); }
  // Records that `bytes` (running total) had arrived at `now_ms`.
  void sample(qint64 now_ms, qint64 bytes);
  // Bytes per second over the window; 0 with fewer than two samples.
  double bytesPerSecond() const;
  // Seconds left for `remaining` bytes at the current speed; -1 when unknown.
  static qint64 etaSeconds(qint64 remaining, double bytes_per_sec);

 private:
  struct Sample {
    qint64 t_ms, bytes;
  };
  int window_ms_;
  std::deque<Sample> samples_;
};

}  // namespace moe
