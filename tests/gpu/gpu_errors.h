// The checks of a test case's loop, reported together at its end, so that one GPU
// run names every failing type or shape (a failed CHECK ends its case at the first),
// with the largest error seen (how much room each tolerance leaves).
#pragma once

#include <string>

#include "gpu/gpu_check.h"

namespace gpu_check {

struct Errors {
  std::string failures, worst_what;
  double worst = 0;
  void check(bool ok, double err, const std::string& what) {
    if (!ok) failures += "\n   " + what + format(" (err %g)", err);
    if (err > worst) worst = err, worst_what = what;
  }
  void report() const {
    INFO("largest error %g (%s)", worst, worst_what.c_str());
    CHECK_MSG(failures.empty(), "failed:" + failures);
  }
};

}  // namespace gpu_check
