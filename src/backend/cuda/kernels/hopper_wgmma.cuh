// Building blocks of the Hopper (sm_90a) attention kernel: mbarriers, proxy fences, wgmma shared-memory descriptors
// for 128-byte-swizzled tiles and the bf16 wgmma instructions it issues. Include only from code compiled under
// __CUDA_ARCH_FEAT_SM90_ALL (wgmma and setmaxnreg exist on sm_90a alone).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace qinfer::cuda::sm90 {

__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// Tiles are [slab][rows][64] bf16: 128-byte rows of 64 elements, slabs of 64 columns one after the other, the 16-byte
// chunk index XOR-ed with (row % 8) — the hardware's 128-byte swizzle when each slab starts at a 1024-byte boundary.
// Byte offset of element (row, column) in a tile of `rows` rows.
__device__ __forceinline__ uint32_t swizzled_offset(int rows, int row, int column) {
  const int slab = column / 64, chunk = (column % 64) / 8;
  return static_cast<uint32_t>(slab * rows * 128 + row * 128 + ((chunk ^ (row & 7)) << 4) + (column % 8) * 2);
}

// wgmma shared-memory matrix descriptor for such a tile: start address, leading and stride byte offsets (all >> 4),
// layout 1 = 128-byte swizzle. K-major operands (Q, K): rows 8 apart are 1024 bytes apart (stride), the leading offset
// is unused. MN-major operands (V, transposed): 8 keys are 1024 bytes apart (stride), the next 64 columns one slab
// further (leading).
__device__ __forceinline__ uint64_t swizzled_descriptor(uint32_t start_address, uint32_t leading_bytes) {
  constexpr uint64_t kSwizzle128B = 1;
  constexpr uint64_t kStrideBytes = 1024;
  return static_cast<uint64_t>((start_address & 0x3FFFF) >> 4) | (static_cast<uint64_t>(leading_bytes >> 4) << 16) |
         ((kStrideBytes >> 4) << 32) | (kSwizzle128B << 62);
}

// The descriptor of the address `bytes` (a multiple of 16) after that of `descriptor`: only the start address field
// (bits 0-13, address >> 4) changes, and shared-memory addresses stay below 2^18, so it never carries into the
// leading offset. One 32-bit add instead of rebuilding the descriptor from the address.
__device__ __forceinline__ uint64_t advance_descriptor(uint64_t descriptor, uint32_t bytes) {
  const uint32_t low = static_cast<uint32_t>(descriptor) + (bytes >> 4);
  return (descriptor & 0xFFFFFFFF00000000ull) | low;
}

__device__ __forceinline__ void mbarrier_init(uint64_t* barrier, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier)) : "memory");
}
// Blocks until the phase with the given parity has completed (acquire: the arrivals' writes are visible after).
__device__ __forceinline__ void mbarrier_wait(uint64_t* barrier, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred complete;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
        "selp.u32 %0, 1, 0, complete;\n}\n"
        : "=r"(done)
        : "r"(shared_address(barrier)), "r"(parity)
        : "memory");
  } while (!done);
}

// As mbarrier_wait, but each try may suspend the thread for up to 10 ms until the phase completes (the hint CUTLASS
// passes) instead of returning after the default, system-dependent time: a warp that waits long (a producer waiting for
// a free slot) then sleeps instead of spinning and taking issue slots from the warps of its scheduler.
__device__ __forceinline__ void mbarrier_wait_suspending(uint64_t* barrier, uint32_t parity) {
  constexpr uint32_t kSuspendTimeHintNs = 10'000'000;
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred complete;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2, %3;\n"
        "selp.u32 %0, 1, 0, complete;\n}\n"
        : "=r"(done)
        : "r"(shared_address(barrier)), "r"(parity), "r"(kSuspendTimeHintNs)
        : "memory");
  } while (!done);
}

// 16-byte asynchronous global -> shared copy to a shared-memory address; zero-fills the destination when !valid.
__device__ __forceinline__ void cp_async_16(uint32_t destination, const void* source, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(destination), "l"(source), "r"(valid ? 16 : 0));
}

// Makes the barriers' initialisation visible to the bulk copy engine (the async proxy) before it signals them.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// Arrives on the barrier and adds `bytes` to the transaction bytes its current phase waits for.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
}

// Bulk tensor copy (TMA) of the box at element coordinates (column, row) of `map` to the shared-memory address
// `destination`; its bytes complete transactions on `barrier`. `map` must be a __grid_constant__ kernel parameter.
__device__ __forceinline__ void tma_load_2d(uint32_t destination, const void* map, int column, int row,
                                            uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          destination),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(column), "r"(row), "r"(shared_address(barrier))
      : "memory");
}

// Bulk copy (no tensor map) of `bytes` (a multiple of 16) from global `source` to the shared-memory address
// `destination`, both 16-byte aligned; its bytes complete transactions on `barrier`.
__device__ __forceinline__ void bulk_copy(uint32_t destination, const void* source, uint32_t bytes, uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(destination),
      "l"(source), "r"(bytes), "r"(shared_address(barrier))
      : "memory");
}

// Makes this thread's completed generic-proxy writes to shared memory (cp.async included) visible to the tensor cores.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// Barrier among `threads` threads (a multiple of 32) under id `id` (1..15; 0 is __syncthreads).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Arrives at that barrier without waiting (the waiting side uses named_barrier_sync with the same count).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Registers a wgmma in flight writes (accumulators) or reads (A fragments) must stay put until wgmma_wait: this tells
// the compiler they are used and changed there.
template <int kRows>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[kRows][4]) {
#pragma unroll
  for (int i = 0; i < kRows; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[i][e])::"memory");
}
template <int kRows>
__device__ __forceinline__ void wgmma_fence_operands(uint32_t (&a)[kRows][4]) {
#pragma unroll
  for (int i = 0; i < kRows; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[i][e])::"memory");
}

// 2^x on the special-function unit (flushes denormals; 2^-inf = 0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Accumulators of m64nN: warp w of the warpgroup holds rows 16w + lane/4 (elements 0, 1) and 16w + lane/4 + 8
// (elements 2, 3) of each n8 block, columns 8 * block + 2 * (lane % 4) + {0, 1}: the m16n8 mma.sync layout.
// d[8][4] += A(64x16, registers, m16n8k16 A-fragment layout per warp) * B(16x64, shared, MN-major).
__device__ __forceinline__ void wgmma_m64n64k16_rs_mn_major_b(float (&d)[8][4], const uint32_t (&a)[4],
                                                              uint64_t b_desc) {
  asm volatile(
      "{\n.reg .pred accumulate;\nsetp.ne.u32 accumulate, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, "
      "%35}, %36, accumulate, 1, 1, 1;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1u));
}

// d[16][4] (+)= A(64x16, shared, K-major) * B(16x128, shared, K-major); zero_init starts from 0.
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[16][4], uint64_t a_desc, uint64_t b_desc,
                                                    bool zero_init) {
  asm volatile(
      "{\n.reg .pred accumulate;\nsetp.eq.u32 accumulate, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63}, %64, %65, accumulate, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
        "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),
        "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]),
        "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]),
        "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]),
        "+f"(d[15][3])
      : "l"(a_desc), "l"(b_desc), "r"(static_cast<uint32_t>(zero_init)));
}

// d[16][4] += A(64x16, registers, m16n8k16 A-fragment layout per warp) * B(16x128, shared, MN-major).
__device__ __forceinline__ void wgmma_m64n128k16_rs_mn_major_b(float (&d)[16][4], const uint32_t (&a)[4],
                                                               uint64_t b_desc) {
  asm volatile(
      "{\n.reg .pred accumulate;\nsetp.ne.u32 accumulate, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, "
      "%35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "
      "%57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, accumulate, 1, 1, 1;\n}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
        "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
        "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]),
        "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]), "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]),
        "+f"(d[8][3]), "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]), "+f"(d[10][0]), "+f"(d[10][1]),
        "+f"(d[10][2]), "+f"(d[10][3]), "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]), "+f"(d[12][0]),
        "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]), "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]),
        "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]), "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]),
        "+f"(d[15][3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(1u));
}

}  // namespace qinfer::cuda::sm90
