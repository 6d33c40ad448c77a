// The checks of a test case's loop, reported together at its end, so that one GPU
// run names every failing type or shape (a failed ASSERT ends its case at the first),
// with the largest error seen (how much room each tolerance leaves).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "support/test_log.h"

namespace moe::test {

struct Errors {
  std::string failures, worst_what;
  double worst = 0;
  void check(bool ok, double err, const std::string& what) {
    if (!ok) failures += "\n   " + what + format(" (err %g)", err);
    if (err > worst) worst = err, worst_what = what;
  }
  // A fatal failure in report() returns from report() only: a case that goes on
  // after it calls ASSERT_NO_FATAL_FAILURE(errors.report()).
  void report() const {
    info("largest error %g (%s)", worst, worst_what.c_str());
    ASSERT_TRUE(failures.empty()) << "failed:" << failures;
  }
};

}  // namespace moe::test
