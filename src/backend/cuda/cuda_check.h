// Error checking for CUDA runtime and cuBLASLt calls. A failing call is a bug or a broken device, so it aborts with
// file:line and the driver's message; out-of-memory at planning time is reported separately as a typed error.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "util/error.h"

#define CUDA_CHECK(call)                                                                           \
  do {                                                                                             \
    cudaError_t cuda_check_status_ = (call);                                                       \
    if (cuda_check_status_ != cudaSuccess)                                                         \
      ::qinfer::check_failed(#call, __FILE__, __LINE__, ::cudaGetErrorString(cuda_check_status_)); \
  } while (0)

// After a kernel launch: catches bad launch configurations at the launch site.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                                                            \
  do {                                                                                                                \
    cublasStatus_t cublas_check_status_ = (call);                                                                     \
    if (cublas_check_status_ != CUBLAS_STATUS_SUCCESS)                                                                \
      ::qinfer::check_failed(#call, __FILE__, __LINE__,                                                               \
                             std::string("cuBLAS status ") + std::to_string(static_cast<int>(cublas_check_status_))); \
  } while (0)
