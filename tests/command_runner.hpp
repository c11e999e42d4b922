// Runs the built logprobs-check as a user would (a shell command line), for the tests of the
// command: its exit status and what it printed.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "temp_dir.hpp"

#ifndef LOGPROBS_CHECK_PATH
#error "LOGPROBS_CHECK_PATH must name the built logprobs-check binary"
#endif

namespace logprobs::testing_support {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// `logprobs-check ARGS`, ARGS as a shell would split them.
inline CommandResult logprobs_check(const std::string& args) {
  const std::string command = std::string("'") + LOGPROBS_CHECK_PATH + "' " + args + " 2>&1";
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

inline std::string path_of(const std::string& name) { return (temp_dir() / name).string(); }

inline bool contains(const std::string& text, const std::string& fragment) {
  return text.find(fragment) != std::string::npos;
}

}  // namespace logprobs::testing_support
