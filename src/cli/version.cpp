#include "cli/version.h"

#include "git_commit.h"

namespace qinfer::cli {

std::string version_string() {
  std::string s = "qinfer " QINFER_VERSION " (commit " QINFER_GIT_COMMIT "; backends: cpu";
#ifdef QINFER_CUDA_ARCHS
  s += " cuda(" QINFER_CUDA_ARCHS ")";
#endif
  return s + ")";
}

}  // namespace qinfer::cli
