// What the GPU tests share: whether CI asked for the quick set, and the line a
// suite prints when it skips for want of a device (CTest's SKIP_REGULAR_EXPRESSION
// matches it, so a skipped suite is reported as skipped, not passed).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "inference/backend_factory.h"

namespace moe::test {

// MOECHAT_GPU_TESTS_QUICK=1 (CI's ThreadSanitizer stage): a test whose cases repeat
// the same threads over more shapes or architectures runs a representative few;
// the full set runs in the plain and ASan stages.
inline bool gpuTestsQuick() {
  const char* v = std::getenv("MOECHAT_GPU_TESTS_QUICK");
  return v && *v && std::string(v) != "0";
}

// MOECHAT_TESTS_PATHS_ONCE=1 (CI's AddressSanitizer stage): a test whose cases run
// the same code over more shapes or combinations runs each code path once (each
// architecture, each weight type, each policy), not each combination of them; the
// plain stage runs them all, and a memory error is a property of the path.
inline bool testsPathsOnce() {
  const char* v = std::getenv("MOECHAT_TESTS_PATHS_ONCE");
  return v && *v && std::string(v) != "0";
}

// Prefix of the skip message: GTEST_SKIP() << kNoCudaDevice << why.
inline constexpr const char* kNoCudaDevice = "no CUDA device: ";

// Why no CUDA device is usable here; empty where one is. Asked once per program.
inline const std::string& noCudaReason() {
  static const std::string why = [] {
    std::string w;
    return moe::cudaDeviceAvailable(&w) ? std::string() : (w.empty() ? std::string("unavailable") : w);
  }();
  return why;
}

// The base of a GPU test suite: each case skips where no device is usable (a
// skip in SetUpTestSuite does not skip the cases in GoogleTest 1.12). A suite
// makes its backends in its own static SetUpTestSuite, after checking
// noCudaReason() itself.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!noCudaReason().empty()) GTEST_SKIP() << kNoCudaDevice << noCudaReason();
  }
};

}  // namespace moe::test
