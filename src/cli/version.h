// Version, commit and compiled-in backends with their GPU architectures, e.g.
// "qinfer 0.1.0 (commit 0123456789ab; backends: cpu cuda(sm_80,sm_89,sm_90a))".
#pragma once

#include <string>

namespace qinfer::cli {

std::string version_string();

}  // namespace qinfer::cli
