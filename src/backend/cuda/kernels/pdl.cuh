// Programmatic dependent launch (Hopper): a kernel launched with launch_dependent() may start while its predecessor on
// the stream is still running. It must call wait_for_producer() before it reads anything the predecessor writes, and
// before it writes anything the predecessor may still read; work on data no kernel writes (weights) may come first.
// Kernels call allow_dependents() early so that their successor's launch latency and weight prefetch overlap their own
// tail; the register decode attention kernels call it only after their wait, so that o_proj's prefetch does not delay
// its first loads (graph_cache.h, GraphNodeRole::kRegisterDecodeAttention). Without PDL support (sm_80/89, or a plain
// <<<>>> launch) both calls are no-ops and the launch is an ordinary one. Whether a launch may overlap is the loaded
// image's property (DeviceCapabilities::programmatic_launch), not the device's: PTX for an older architecture run on a
// Hopper GPU has the griddepcontrol instructions compiled out, so its kernels must not overlap their predecessors.
//
// Ordering stays transitive: every kernel launched this way calls wait_for_producer() before it exits, in every block
// or (decode attention's idle splits) in at least one block of the launch, so its completion implies its
// predecessor's completion.
#pragma once

#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_capabilities.h"

namespace qinfer::cuda {

__device__ __forceinline__ void wait_for_producer() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Launches `kernel(params)` allowing it to overlap its predecessor on `stream` (see above).
template <typename Params>
void launch_dependent(void (*kernel)(Params), dim3 grid, dim3 block, size_t shared_bytes, const KernelStream& stream,
                      const Params& params) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream.stream;
  config.attrs = &attribute;
  config.numAttrs = stream.device.programmatic_launch ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, params));
}

}  // namespace qinfer::cuda
