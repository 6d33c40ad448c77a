// Runs a program to completion for a test (the CLI, node): its exit status and
// what it wrote. Qt-free (fork/exec/poll).
#pragma once

#include <string>
#include <vector>

namespace moe::test {

struct ProgramResult {
  int exit_code = -1;  // -1: it did not exit on its own (a signal, or killed at the timeout)
  bool timed_out = false;
  std::string out, err;  // stdout and stderr
  std::string error;     // non-empty: it could not be started
};

// argv[0] is the program (a path, or a name looked up in PATH). `input` goes to
// its stdin, which is then closed. Killed after `timeout_s` seconds.
// `env` entries ("NAME=value") are added to the environment it inherits.
ProgramResult runProgram(const std::vector<std::string>& argv, double timeout_s = 120,
                         const std::string& input = {}, const std::vector<std::string>& env = {});

}  // namespace moe::test
