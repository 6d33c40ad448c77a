// The error a compute device's failure raises. Its own header (C++17), so the
// CUDA code, which nvcc compiles as C++17, can derive from it.
#pragma once

#include <stdexcept>

namespace moe {

// The compute device failed (a CUDA error: a fault, a lost device, out of memory
// mid-reply). After a fault its state is lost: the backend is not used again.
class DeviceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace moe
