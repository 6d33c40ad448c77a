#include "app/qt/device_probe.h"

#include <exception>

namespace moe {

DeviceProbe::DeviceProbe(Probe probe, QObject* parent)
    : QObject(parent),
      probe_(probe ? std::move(probe) : Probe([] { return probeDevice(DeviceChoice::kAuto); })) {}

DeviceProbe::~DeviceProbe() {
  if (thread_) thread_->wait();
}

void DeviceProbe::start() {
  if (thread_ || done_) return;
  thread_.reset(QThread::create([this] {
    try {
      result_ = probe_();
    } catch (const std::exception& e) {
      result_ = DeviceMemory{};
      result_.why_cpu = e.what();
    }
  }));
  thread_->setObjectName("deviceProbe");
  // finished is emitted by the probe's thread: queued to this object's thread.
  connect(thread_.get(), &QThread::finished, this, &DeviceProbe::onFinished, Qt::QueuedConnection);
  thread_->start();
}

void DeviceProbe::onFinished() {
  if (done_) return;  // waitForResult took the answer first
  device_ = result_;
  done_ = true;
  emit probed();
}

const DeviceMemory& DeviceProbe::waitForResult() {
  start();
  if (!done_) {
    thread_->wait();
    onFinished();
  }
  return device_;
}

}  // namespace moe
