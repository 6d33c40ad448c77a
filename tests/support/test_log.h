// Text for GoogleTest programs: printf-style messages for assertion streams
// (EXPECT_TRUE(ok) << format("step %d: err %g", i, err)) and INFO lines for the
// figures a test measures, which GoogleTest itself has no place for.
#pragma once

#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <string>

namespace moe::test {

inline std::string vformat(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? size_t(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
  return out;
}

__attribute__((format(printf, 1, 2))) inline std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  return s;
}

// "INFO   : Suite.case: text" on stdout, in line with GoogleTest's own output.
__attribute__((format(printf, 1, 2))) inline void info(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const std::string s = vformat(fmt, ap);
  va_end(ap);
  const auto* t = ::testing::UnitTest::GetInstance()->current_test_info();
  if (t)
    std::printf("INFO   : %s.%s: %s\n", t->test_suite_name(), t->name(), s.c_str());
  else
    std::printf("INFO   : %s\n", s.c_str());
  std::fflush(stdout);
}

}  // namespace moe::test
