#include "backend/cuda/device_buffer.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "util/error.h"

namespace qinfer::cuda {

namespace {

std::string gib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1u << 30));
  return text;
}

}  // namespace

void* DeviceAllocator::allocate(size_t bytes, const char* what) {
  void* data = nullptr;
  const cudaError_t status = cudaMalloc(&data, bytes);
  if (status == cudaSuccess) return data;
  cudaGetLastError();  // clear the error so that later calls do not report it
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  throw Error(ErrorKind::kOutOfMemory, std::string("out of GPU memory allocating ") + what + ": asked " + gib(bytes) +
                                           ", free " + gib(free_bytes) + " of " + gib(total_bytes) + " (" +
                                           cudaGetErrorString(status) + ")");
}

void DeviceAllocator::release(void* data) { cudaFree(data); }

void* PinnedAllocator::allocate(size_t bytes, const char* what) {
  void* data = nullptr;
  const cudaError_t status = cudaMallocHost(&data, bytes);
  if (status == cudaSuccess) return data;
  cudaGetLastError();
  throw Error(ErrorKind::kOutOfMemory, std::string("cannot allocate ") + gib(bytes) + " of pinned host memory for " +
                                           what + ": " + cudaGetErrorString(status));
}

void PinnedAllocator::release(void* data) { cudaFreeHost(data); }

}  // namespace qinfer::cuda
