// The kernels are compiled for head_dim 64 and 128 (the backend refuses others at load): one place maps the runtime
// value to the template argument.
#pragma once

#include <type_traits>

#include "util/error.h"

namespace qinfer::cuda {

// Calls launch(std::integral_constant<int, head_dim>{}) for head_dim 64 or 128.
template <typename Launch>
void with_head_dim(int head_dim, Launch&& launch) {
  if (head_dim == 128)
    launch(std::integral_constant<int, 128>{});
  else if (head_dim == 64)
    launch(std::integral_constant<int, 64>{});
  else
    QINFER_CHECK(false, "head_dim must be 64 or 128");
}

}  // namespace qinfer::cuda
