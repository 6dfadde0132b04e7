// Runs the real qinfer binary for the command-line tests: $QINFER_BIN when set (the GPU machine runs test binaries
// copied away from their build folder), else the build's own (QINFER_BIN at compile time).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace qinfer::cli {

struct ProcessResult {
  int exit_code;
  std::string output;  // standard output and standard error
};

// `qinfer --log-level warn ARGS` (`quiet` false: without --log-level), through the shell.
inline ProcessResult run_qinfer(const std::string& args, bool quiet = true) {
  const char* binary = std::getenv("QINFER_BIN");
  const std::string command = std::string(binary != nullptr && *binary != '\0' ? binary : QINFER_BIN) +
                              (quiet ? " --log-level warn " : " ") + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::string output;
  std::array<char, 4096> buffer;
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

}  // namespace qinfer::cli
