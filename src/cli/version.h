// Version and compiled-in backends, e.g. "qinfer 0.1.0 (backends: cpu cuda(sm_80,sm_89,sm_90a))".
#pragma once

#include <string>

namespace qinfer::cli {

std::string version_string();

}  // namespace qinfer::cli
