// The device the app's plans are resolved against while no model is loaded (a loaded
// model brings the device its load saw). Asking CUDA (cudaMemGetInfo: the driver's
// start-up) can take seconds, so the probe runs on a thread of its own, once, never on
// the GUI thread; probed() is emitted on the owner's thread when the answer is in,
// and views waiting for it update then.
#pragma once

#include <QObject>
#include <QThread>
#include <functional>
#include <memory>

#include "app/core/load_plan.h"

namespace moe {

class DeviceProbe : public QObject {
  Q_OBJECT

 public:
  using Probe = std::function<DeviceMemory()>;
  // probe: what asks the device (by default probeDevice(DeviceChoice::kAuto)).
  explicit DeviceProbe(Probe probe = {}, QObject* parent = nullptr);
  // Waits for a probe in flight (the thread reads only what it was given).
  ~DeviceProbe() override;

  // Starts the probe on its thread; nothing when it runs or has answered.
  void start();
  bool done() const { return done_; }
  // The answer; a default DeviceMemory (the CPU) until done().
  const DeviceMemory& device() const { return device_; }
  // Blocks the caller until the answer is in (starting the probe if need be), for a
  // caller that cannot do without it. The GUI's views wait for probed() instead.
  const DeviceMemory& waitForResult();

 signals:
  void probed();

 private:
  void onFinished();

  Probe probe_;
  std::unique_ptr<QThread> thread_;
  DeviceMemory result_;  // written by the thread, read once it has finished
  DeviceMemory device_;
  bool done_ = false;
};

}  // namespace moe
