// Runs the built logprobs-check as a user would (a shell command line), for the tests of the
// command: its exit status and what it printed.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>

#include "temp_dir.hpp"

#ifndef LOGPROBS_CHECK_PATH
#error "LOGPROBS_CHECK_PATH must name the built logprobs-check binary"
#endif

namespace logprobs::testing_support {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together (stderr alone when stdout went elsewhere)
};

// `logprobs-check ARGS` started and not yet waited for, so that several run side by side (as the
// tasks of a job array do). `environment` goes before the command: "VAR=1 OTHER=2".
class StartedCommand {
 public:
  explicit StartedCommand(const std::string& args, const std::string& environment = "") {
    const std::string command = environment + " '" + LOGPROBS_CHECK_PATH + "' " + args + " 2>&1";
    pipe_ = ::popen(command.c_str(), "r");
  }
  StartedCommand(const StartedCommand&) = delete;
  StartedCommand& operator=(const StartedCommand&) = delete;
  ~StartedCommand() {
    if (pipe_ != nullptr) ::pclose(pipe_);
  }
  CommandResult wait() {
    CommandResult result;
    if (pipe_ == nullptr) return result;
    char buffer[4096];
    std::size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe_)) > 0) result.output.append(buffer, n);
    const int status = ::pclose(pipe_);
    pipe_ = nullptr;
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
  }

 private:
  FILE* pipe_ = nullptr;
};

// `logprobs-check ARGS`, ARGS as a shell would split them.
inline CommandResult logprobs_check(const std::string& args, const std::string& environment = "") {
  return StartedCommand(args, environment).wait();
}

// A shell command line of one's own (a prefix such as `timeout` or `setpriv`), run to its end.
inline CommandResult run_shell(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {};
  CommandResult result;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// The same, killed after `seconds` (exit 124), for a command that might hang.
inline CommandResult logprobs_check_within(int seconds, const std::string& args) {
  return run_shell("timeout " + std::to_string(seconds) + " '" + LOGPROBS_CHECK_PATH + "' " + args + " 2>&1");
}

// The same with its standard output sent to `stdout_path` (/dev/full, say): `output` is stderr.
inline CommandResult logprobs_check_with_stdout(const std::string& args, const std::string& stdout_path) {
  return run_shell(std::string("'") + LOGPROBS_CHECK_PATH + "' " + args + " 2>&1 >'" + stdout_path + "'");
}

// The same with its standard output a pipe whose reading end is closed before it starts (a
// `| head -1` that has already exited): `output` is stderr, exit_code -1 when a signal ended it.
inline CommandResult logprobs_check_into_closed_pipe(const std::string& args) {
  int out[2], err[2];
  if (::pipe(out) != 0 || ::pipe(err) != 0) return {};
  ::close(out[0]);
  const std::string command = std::string("exec '") + LOGPROBS_CHECK_PATH + "' " + args;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::close(out[1]);
    ::close(err[0]);
    ::close(err[1]);
    ::signal(SIGPIPE, SIG_DFL);  // as a shell starts a command, whatever the test runner ignores
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  CommandResult result;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(err[0], buffer, sizeof buffer)) > 0) result.output.append(buffer, std::size_t(n));
  ::close(err[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (WIFSIGNALED(status)) result.output += "\n(ended by signal " + std::to_string(WTERMSIG(status)) + ")";
  return result;
}

struct MeasuredResult : CommandResult {
  double seconds = 0;
  long max_rss_kb = 0;  // the command's peak resident memory
};

// `logprobs-check ARGS` with its time and peak memory (the shell execs it, so wait4 measures it).
inline MeasuredResult logprobs_check_measured(const std::string& args) {
  const std::string command = std::string("exec '") + LOGPROBS_CHECK_PATH + "' " + args + " 2>&1";
  MeasuredResult result;
  int fds[2];
  if (::pipe(fds) != 0) return result;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[1]);
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buffer, sizeof buffer)) > 0) result.output.append(buffer, std::size_t(n));
  ::close(fds[0]);
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.max_rss_kb = usage.ru_maxrss;
  return result;
}

inline std::string path_of(const std::string& name) { return (temp_dir() / name).string(); }

inline bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

}  // namespace logprobs::testing_support
