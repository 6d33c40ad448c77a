#include "run_program.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace moe::test {

namespace {

void closeBoth(int fds[2]) {
  if (fds[0] >= 0) close(fds[0]);
  if (fds[1] >= 0) close(fds[1]);
}

}  // namespace

ProgramResult runProgram(const std::vector<std::string>& argv, double timeout_s, const std::string& input,
                         const std::vector<std::string>& env) {
  ProgramResult r;
  if (argv.empty()) {
    r.error = "no program given";
    return r;
  }
  // Built before fork: the child only calls async-signal-safe functions.
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (char** e = environ; *e; ++e) envp.push_back(*e);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, exec_err[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe2(exec_err, O_CLOEXEC)) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    closeBoth(in), closeBoth(out), closeBoth(err), closeBoth(exec_err);
    return r;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    r.error = std::string("fork: ") + std::strerror(errno);
    closeBoth(in), closeBoth(out), closeBoth(err), closeBoth(exec_err);
    return r;
  }
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    execvpe(args[0], args.data(), envp.data());
    const int e = errno;
    (void)!write(exec_err[1], &e, sizeof e);
    _exit(127);
  }
  close(in[0]), close(out[1]), close(err[1]), close(exec_err[1]);
  int exec_errno = 0;
  if (read(exec_err[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno)
    r.error = "cannot run " + argv[0] + ": " + std::strerror(exec_errno);
  close(exec_err[0]);

  signal(SIGPIPE, SIG_IGN);  // a child that exits without reading its input
  size_t written = 0;
  if (input.empty() || !r.error.empty()) close(in[1]), in[1] = -1;
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  if (in[1] >= 0) fcntl(in[1], F_SETFL, O_NONBLOCK);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {in[1], POLLOUT, 0}};
    if (!out_open) fds[0].fd = -1;
    if (!err_open) fds[1].fd = -1;
    if (poll(fds, 3, int(std::min<long long>(left.count(), 1000))) < 0 && errno != EINTR) break;
    char buf[65536];
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(i == 0 ? out[0] : err[0], buf, sizeof buf);
      if (n > 0)
        (i == 0 ? r.out : r.err).append(buf, size_t(n));
      else if (n == 0 || (errno != EAGAIN && errno != EINTR))
        (i == 0 ? out_open : err_open) = false;
    }
    if (in[1] >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t n = write(in[1], input.data() + written, input.size() - written);
      if (n > 0) written += size_t(n);
      if (n < 0 && errno != EAGAIN && errno != EINTR) written = input.size();
      if (written == input.size()) close(in[1]), in[1] = -1;
    }
  }
  if (in[1] >= 0) close(in[1]);
  close(out[0]), close(err[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && !r.timed_out) r.exit_code = WEXITSTATUS(status);
  return r;
}

}  // namespace moe::test
