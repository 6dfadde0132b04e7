// Hopper's bulk tensor copy engine (TMA, sm_90): a 2-D tile copy from global memory described by a CUtensorMap into
// shared memory, completing on an mbarrier by transaction bytes. Include only from device code compiled for sm_90+.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace qinfer::cuda::sm90 {

// Makes the mbarrier initialisation visible to the copy engine (the async proxy) before the first copy signals it.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrives on the barrier (its init count is 1) and expects `bytes` more transaction bytes in the current phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(barrier))),
               "r"(bytes)
               : "memory");
}

// Copies the box at element coordinates (x, y) of `map` to `destination`; its bytes complete a transaction on
// `barrier`. `map` must live in kernel parameter, constant or global memory (a __grid_constant__ parameter).
__device__ __forceinline__ void bulk_tensor_load_2d(void* destination, const CUtensorMap* map, int x, int y,
                                                    uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          static_cast<uint32_t>(__cvta_generic_to_shared(destination))),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y),
      "r"(static_cast<uint32_t>(__cvta_generic_to_shared(barrier)))
      : "memory");
}

}  // namespace qinfer::cuda::sm90
