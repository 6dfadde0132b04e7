// gpu_probe: exits 0 when the CUDA driver reports at least one device, else prints why and exits 77 (CTest's skip
// code for the GPU tests). Links the CUDA runtime only, so it answers in milliseconds where loading a GPU test
// binary (its kernel images and cuBLASLt) takes most of a second: gpu_test_launcher.sh asks it before each GPU test.
#include <cuda_runtime.h>

#include <cstdio>

int main() {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status == cudaSuccess && devices > 0) return 0;
  std::printf("no usable GPU: %s\n", status == cudaSuccess ? "no CUDA device" : cudaGetErrorString(status));
  return 77;
}
