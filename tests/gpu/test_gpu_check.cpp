// The harness itself (gpu_check.h): each macro passes on a true check and, on a
// false one, throws the Failure that ends a case, with the message Qt Test would give.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu/gpu_check.h"

namespace {

// The message of the Failure `body` throws, or "" when it throws none.
template <class F>
std::string failureOf(F body) {
  try {
    body();
  } catch (const gpu_check::Failure& f) {
    return f.message;
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE(checksPass) {
  CHECK(1 + 1 == 2);
  CHECK_MSG(true, std::string("unused"));
  CHECK_EQ(std::string("a"), std::string("a"));
  CHECK_EQ((std::vector<int>{1, 2}), (std::vector<int>{1, 2}));
  CHECK_NEAR(1.0, 1.0 + 1e-9, 1e-6);
  CHECK_THROWS(std::invalid_argument, throw std::invalid_argument("x"));
}

TEST_CASE(checkFails) {
  const std::string m = failureOf([] { CHECK(2 < 1); });
  CHECK_MSG(has(m, "'2 < 1' returned FALSE.") && has(m, "Loc: ["), m);
  const std::string m2 = failureOf([] { CHECK_MSG(false, gpu_check::format("step %d: err %g", 3, 0.5)); });
  CHECK_MSG(has(m2, "(step 3: err 0.5)"), m2);
}

TEST_CASE(checkEqPrintsBothValues) {
  const std::string m = failureOf([] { CHECK_EQ(uint64_t(7), uint64_t(8)); });
  CHECK_MSG(has(m, "Actual   (uint64_t(7)): 7") && has(m, "Expected (uint64_t(8)): 8"), m);
  const std::string m2 = failureOf([] {
    CHECK_EQ((std::vector<uint8_t>{1, 2, 3}), (std::vector<uint8_t>{1, 9, 3}));
  });
  CHECK_MSG(has(m2, "[3 elements: 1 2 3]") && has(m2, "first difference at [1]: 2 vs 9"), m2);
  const std::string m3 = failureOf([] { CHECK_EQ(std::string("cpu"), std::string("cuda")); });
  CHECK_MSG(has(m3, "\"cpu\"") && has(m3, "\"cuda\""), m3);
  CHECK(!failureOf([] { CHECK_NEAR(1.0, 1.1, 1e-3); }).empty());
}

TEST_CASE(checkThrowsNeedsThatType) {
  CHECK(has(failureOf([] { CHECK_THROWS(std::invalid_argument, (void)0); }), "no exception caught"));
  const std::string m =
      failureOf([] { CHECK_THROWS(std::invalid_argument, throw std::out_of_range("oops")); });
  CHECK_MSG(has(m, "but caught: oops"), m);
  // A failed check inside the expression is that failure, not "another type".
  const std::string m2 = failureOf([] { CHECK_THROWS(std::invalid_argument, [] { CHECK(false); }()); });
  CHECK_MSG(has(m2, "'false' returned FALSE."), m2);
}

TEST_CASE(failAndSkipAreNotStdExceptions) {
  // A test's own catch (const std::exception&) must not swallow a failure or a skip.
  bool swallowed = false;
  try {
    try {
      FAIL("stop");
    } catch (const std::exception&) {
      swallowed = true;
    }
  } catch (const gpu_check::Failure& f) {
    CHECK(has(f.message, "stop"));
  }
  CHECK(!swallowed);
  try {
    SKIP_SUITE("no device");
  } catch (const gpu_check::Skipped& s) {
    CHECK_EQ(s.reason, std::string("no device"));
    return;
  }
  FAIL("SKIP_SUITE did not throw");
}

GPU_CHECK_MAIN(TestGpuCheck)
