// Runs the real qinfer binary (QINFER_BIN) for the command-line tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace qinfer::cli {

struct ProcessResult {
  int exit_code;
  std::string output;  // standard output and standard error
};

// `qinfer --log-level warn ARGS` (`quiet` false: without --log-level), through the shell.
inline ProcessResult run_qinfer(const std::string& args, bool quiet = true) {
  const std::string command = std::string(QINFER_BIN) + (quiet ? " --log-level warn " : " ") + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace qinfer::cli
