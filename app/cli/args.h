// A small command-line parser: `--name value`, `--name=value`, `-n value`,
// flags, and positionals. Unknown options are errors, never ignored.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace moe::cli {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // value_options: options that take a value; flags: options without one.
  // aliases: short -> long name (e.g. "-n" -> "--max-tokens").
  Args(const std::vector<std::string>& argv, const std::set<std::string>& value_options,
       const std::set<std::string>& flags, const std::map<std::string, std::string>& aliases = {});

  bool flag(const std::string& name) const { return flags_.count(name) > 0; }
  std::optional<std::string> value(const std::string& name) const;
  std::string valueOr(const std::string& name, const std::string& fallback) const;
  std::vector<std::string> values(const std::string& name) const;  // repeatable options
  int intOr(const std::string& name, int fallback) const;
  double doubleOr(const std::string& name, double fallback) const;
  uint64_t uint64Or(const std::string& name, uint64_t fallback) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  std::multimap<std::string, std::string> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positionals_;
};

}  // namespace moe::cli
