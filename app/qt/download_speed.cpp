#include "app/qt/download_speed.h"

#include <cmath>

namespace moe {

void SpeedMeter::sample(qint64 now_ms, qint64 bytes) {
  samples_.push_back({now_ms, bytes});
  // Keep one sample at or before the window's start so the window stays full.
  while (samples_.size() > 2 && samples_[1].t_ms <= now_ms - window_ms_) samples_.pop_front();
}

double SpeedMeter::bytesPerSecond() const {
  if (samples_.size() < 2) return 0;
  const Sample& a = samples_.front();
  const Sample& b = samples_.back();
  if (b.t_ms <= a.t_ms || b.bytes <= a.bytes) return 0;
  return double(b.bytes - a.bytes) * 1000.0 / double(b.t_ms - a.t_ms);
}

qint64 SpeedMeter::etaSeconds(qint64 remaining, double bytes_per_sec) {
  if (remaining < 0 || bytes_per_sec <= 0) return -1;
  return qint64(std::ceil(double(remaining) / bytes_per_sec));
}

}  // namespace moe
