// A Qt-free test harness for the tests that must run on the GPU machine, where
// there is no Qt. The macros follow Qt Test's so converting a test is mechanical:
//
//   QVERIFY(c)                      -> CHECK(c)
//   QVERIFY2(c, qPrintable(msg))    -> CHECK_MSG(c, std::string)   (gpu_check::format builds it)
//   QCOMPARE(a, b)                  -> CHECK_EQ(a, b)   exact ==, also for floats (QCOMPARE is
//                                                        fuzzy there: CHECK_NEAR(a, b, tol))
//   QVERIFY_THROWS_EXCEPTION(E, x)  -> CHECK_THROWS(E, x)
//   QFAIL(msg)                      -> FAIL(msg)
//   QSKIP(r) in initTestCase        -> SKIP_SUITE(r)   (SKIP(r) in any other case)
//   qInfo(fmt, ...)                 -> INFO(fmt, ...)
//   a private slot                  -> TEST_CASE(name) { ... }
//   QTEST_GUILESS_MAIN(TestX)       -> GPU_CHECK_MAIN(TestX)
//
// The output uses Qt Test's line shapes ("PASS   : Suite::case()", "FAIL!  : ...",
// "SKIP   : Suite::initTestCase() reason"), so CTest's SKIP_REGULAR_EXPRESSION
// "SKIP   : [A-Za-z_]+::initTestCase" reports a suite skipped in initTestCase as
// Skipped. A case named initTestCase runs first whatever the command line names; a
// skip there skips the suite (exit 0), a failure there fails every case. A failed
// check ends its case (an exception the harness catches; destructors run). The
// program runs every case, or only those named on the command line (--list names
// them), and exits 1 when any failed.
#pragma once

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpu_check {

struct Case {
  const char* name;
  void (*fn)();
};

inline std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}

struct Registrar {
  Registrar(const char* name, void (*fn)()) { cases().push_back({name, fn}); }
};

// Thrown by a failed check or a skip: not a std::exception, so a test's own
// catch (const std::exception&) lets it through.
struct Failure {
  std::string message;
};
struct Skipped {
  std::string reason;
};

struct State {
  const char* suite = "";
  const char* current = "";
};
inline State& state() {
  static State s;
  return s;
}

// MOECHAT_GPU_TESTS_QUICK=1 (CI's ThreadSanitizer stage): a test whose cases repeat
// the same threads over more shapes or architectures runs a representative few;
// the full set runs in the plain and ASan stages.
inline bool quick() {
  const char* v = std::getenv("MOECHAT_GPU_TESTS_QUICK");
  return v && *v && std::string(v) != "0";
}

inline std::string vformat(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? size_t(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
  return out;
}

// printf-style std::string: the message of CHECK_MSG (QString("...%1").arg(x) in Qt Test).
__attribute__((format(printf, 1, 2))) inline std::string format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string s = vformat(fmt, ap);
  va_end(ap);
  return s;
}

__attribute__((format(printf, 1, 2))) inline void info(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const std::string s = vformat(fmt, ap);
  va_end(ap);
  std::printf("INFO   : %s::%s() %s\n", state().suite, state().current, s.c_str());
  std::fflush(stdout);
}

[[noreturn]] inline void fail(const std::string& what, const char* file, int line) {
  throw Failure{what + "\n   Loc: [" + file + "(" + std::to_string(line) + ")]"};
}

template <class T>
concept Streamable = requires(std::ostream& os, const T& v) {
  os << v;
};
template <class T>
concept Range = requires(const T& v) {
  v.begin();
  v.end();
  v.size();
};

// A value as text for a failed CHECK_EQ: streamable values as they stream (bytes
// as numbers, floats to 9 digits), ranges by size and their first 8 elements.
template <class T>
std::string show(const T& v) {
  std::ostringstream os;
  os.precision(9);
  if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t> || std::is_same_v<T, char>)
    os << int(v);
  else if constexpr (std::is_same_v<T, bool>)
    os << (v ? "true" : "false");
  else if constexpr (std::is_enum_v<T>)
    os << static_cast<long long>(v);
  else if constexpr (std::is_convertible_v<T, std::string_view>)
    os << '"' << std::string_view(v) << '"';
  else if constexpr (Streamable<T>)
    os << v;
  else if constexpr (Range<T>) {
    os << "[" << v.size() << " elements:";
    size_t i = 0;
    for (const auto& e : v) {
      if (i++ == 8) {
        os << " ...";
        break;
      }
      os << " " << show(e);
    }
    os << "]";
  } else
    os << "<not printable>";
  return os.str();
}

// The first index where two ranges differ, or their common size when none does.
template <class A, class B>
std::string firstDifference(const A& a, const B& b) {
  if constexpr (Range<A> && Range<B>) {
    size_t i = 0;
    auto ia = a.begin();
    auto ib = b.begin();
    for (; ia != a.end() && ib != b.end(); ++ia, ++ib, ++i)
      if (!(*ia == *ib))
        return "\n   first difference at [" + std::to_string(i) + "]: " + show(*ia) + " vs " + show(*ib);
    return "";
  } else {
    return "";
  }
}

template <class A, class B>
void checkEq(const A& a, const B& b, const char* ea, const char* eb, const char* file, int line) {
  if (a == b) return;
  fail(std::string("Compared values are not the same\n   Actual   (") + ea + "): " + show(a) +
           "\n   Expected (" + eb + "): " + show(b) + firstDifference(a, b),
       file, line);
}

inline void checkNear(double a, double b, double tol, const char* ea, const char* eb, const char* file,
                      int line) {
  if (std::abs(a - b) <= tol) return;
  fail(std::string("Compared values differ by more than ") + show(tol) + "\n   Actual   (" + ea +
           "): " + show(a) + "\n   Expected (" + eb + "): " + show(b),
       file, line);
}

inline bool runOne(const Case& c, int& passed, int& failed, int& skipped) {
  state().current = c.name;
  try {
    c.fn();
    std::printf("PASS   : %s::%s()\n", state().suite, c.name);
    ++passed;
  } catch (const Skipped& s) {
    std::printf("SKIP   : %s::%s() %s\n", state().suite, c.name, s.reason.c_str());
    ++skipped;
    std::fflush(stdout);
    return false;
  } catch (const Failure& f) {
    std::printf("FAIL!  : %s::%s() %s\n", state().suite, c.name, f.message.c_str());
    ++failed;
  } catch (const std::exception& e) {
    std::printf("FAIL!  : %s::%s() Caught unhandled exception: %s\n", state().suite, c.name, e.what());
    ++failed;
  } catch (...) {
    std::printf("FAIL!  : %s::%s() Caught unhandled exception of unknown type\n", state().suite, c.name);
    ++failed;
  }
  std::fflush(stdout);
  return true;
}

inline int run(const char* suite, int argc, char** argv) {
  state().suite = suite;
  std::vector<std::string> wanted(argv + 1, argv + argc);
  for (const auto& w : wanted) {
    if (w == "--list" || w == "-functions") {
      for (const auto& c : cases()) std::printf("%s\n", c.name);
      return 0;
    }
    bool known = false;
    for (const auto& c : cases()) known = known || w == c.name;
    if (!known) {
      std::fprintf(stderr, "%s: no test case named '%s' (--list names them)\n", suite, w.c_str());
      return 2;
    }
  }
  std::printf("********* Start testing of %s *********\n", suite);
  int passed = 0, failed = 0, skipped = 0;
  const Case* init = nullptr;
  for (const auto& c : cases())
    if (std::strcmp(c.name, "initTestCase") == 0) init = &c;
  bool suite_skipped = false;
  if (init) {
    const int failed_before = failed;
    suite_skipped = !runOne(*init, passed, failed, skipped);
    if (failed > failed_before) {  // as Qt Test: nothing runs after a failed initTestCase
      std::printf("Totals: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
      return 1;
    }
  }
  if (!suite_skipped)
    for (const auto& c : cases()) {
      if (&c == init) continue;
      if (!wanted.empty()) {
        bool named = false;
        for (const auto& w : wanted) named = named || w == c.name;
        if (!named) continue;
      }
      runOne(c, passed, failed, skipped);
    }
  std::printf("Totals: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
  std::printf("********* Finished testing of %s *********\n", suite);
  return failed > 0 ? 1 : 0;
}

}  // namespace gpu_check

// TEST_CASE(name) { body }: one case, registered in file order.
#define TEST_CASE(name)                                                                        \
  static void gpu_check_case_##name();                                                         \
  static const gpu_check::Registrar gpu_check_registrar_##name(#name, &gpu_check_case_##name); \
  static void gpu_check_case_##name()

#define CHECK(...)                                                               \
  do {                                                                           \
    if (!static_cast<bool>(__VA_ARGS__))                                         \
      gpu_check::fail("'" #__VA_ARGS__ "' returned FALSE.", __FILE__, __LINE__); \
  } while (0)

#define CHECK_MSG(cond, msg)                                                                         \
  do {                                                                                               \
    if (!static_cast<bool>(cond))                                                                    \
      gpu_check::fail("'" #cond "' returned FALSE. (" + std::string(msg) + ")", __FILE__, __LINE__); \
  } while (0)

#define CHECK_EQ(a, b) gpu_check::checkEq((a), (b), #a, #b, __FILE__, __LINE__)
#define CHECK_NEAR(a, b, tol) \
  gpu_check::checkNear(double(a), double(b), double(tol), #a, #b, __FILE__, __LINE__)

#define CHECK_THROWS(Exception, ...)                                                                       \
  do {                                                                                                     \
    try {                                                                                                  \
      (void)(__VA_ARGS__);                                                                                 \
    } catch (const Exception&) {                                                                           \
      break;                                                                                               \
    } catch (const gpu_check::Failure&) {                                                                  \
      throw;                                                                                               \
    } catch (const std::exception& e_) {                                                                   \
      gpu_check::fail(                                                                                     \
          "Expected exception of type " #Exception " to be thrown, but caught: " + std::string(e_.what()), \
          __FILE__, __LINE__);                                                                             \
    } catch (...) {                                                                                        \
      gpu_check::fail("Expected exception of type " #Exception " to be thrown, but caught another type",   \
                      __FILE__, __LINE__);                                                                 \
    }                                                                                                      \
    gpu_check::fail("Expected exception of type " #Exception " to be thrown, but no exception caught",     \
                    __FILE__, __LINE__);                                                                   \
  } while (0)

#define FAIL(msg) gpu_check::fail(std::string(msg), __FILE__, __LINE__)
#define SKIP(reason) \
  throw gpu_check::Skipped { std::string(reason) }
#define SKIP_SUITE(reason) SKIP(reason)
#define INFO(...) gpu_check::info(__VA_ARGS__)

#define GPU_CHECK_MAIN(Suite) \
  int main(int argc, char** argv) { return gpu_check::run(#Suite, argc, argv); }
