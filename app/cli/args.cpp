#include "app/cli/args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace moe::cli {

namespace {
constexpr double kMaxNumberOption = 1e12;
}  // namespace

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& value_options,
           const std::set<std::string>& flags, const std::map<std::string, std::string>& aliases) {
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string a = argv[i];
    if (a.size() < 2 || a[0] != '-' || a == "--") {
      positionals_.push_back(a);
      continue;
    }
    std::optional<std::string> inline_value;
    if (auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
      inline_value = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    if (auto it = aliases.find(a); it != aliases.end()) a = it->second;
    if (flags.count(a)) {
      if (inline_value) throw UsageError("option " + a + " takes no value");
      flags_.insert(a);
    } else if (value_options.count(a)) {
      if (inline_value) {
        values_.emplace(a, *inline_value);
      } else {
        if (i + 1 >= argv.size()) throw UsageError("option " + a + " needs a value");
        values_.emplace(a, argv[++i]);
      }
    } else {
      throw UsageError("unknown option " + a);
    }
  }
}

std::optional<std::string> Args::value(const std::string& name) const {
  auto range = values_.equal_range(name);
  if (range.first == range.second) return std::nullopt;
  return std::prev(range.second)->second;  // the last one wins
}

std::string Args::valueOr(const std::string& name, const std::string& fallback) const {
  return value(name).value_or(fallback);
}

std::vector<std::string> Args::values(const std::string& name) const {
  std::vector<std::string> out;
  for (auto [it, end] = values_.equal_range(name); it != end; ++it) out.push_back(it->second);
  return out;
}

int Args::intOr(const std::string& name, int fallback) const {
  auto v = value(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v->c_str(), &end, 10);
  if (errno || end == v->c_str() || *end || x < -(1L << 31) || x > (1L << 31) - 1)
    throw UsageError("option " + name + " needs an integer, got '" + *v + "'");
  return static_cast<int>(x);
}

uint64_t Args::uint64Or(const std::string& name, uint64_t fallback) const {
  auto v = value(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long x = std::strtoull(v->c_str(), &end, 10);
  if (errno || end == v->c_str() || *end || (*v)[0] == '-')
    throw UsageError("option " + name + " needs a non-negative integer, got '" + *v + "'");
  return x;
}

double Args::doubleOr(const std::string& name, double fallback) const {
  auto v = value(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v->c_str(), &end);
  // Finite and of a size no option means (each option checks its own range too), so
  // that scaling to bytes and converting to an integer stay defined.
  if (errno || end == v->c_str() || *end || !std::isfinite(x) || std::fabs(x) > kMaxNumberOption)
    throw UsageError("option " + name + " needs a finite number of magnitude at most 1e12, got '" + *v + "'");
  return x;
}

}  // namespace moe::cli
