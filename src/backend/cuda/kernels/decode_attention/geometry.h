// The shape of the decode attention blocks, shared by the kernels and the GPU-free split planner (plan.cpp), which
// counts from these how many blocks of each kernel fit on an SM: threads per block, keys per tile, ring depths and
// the bytes of their shared memory. Plain C++: no CUDA types.
#pragma once

namespace qinfer::cuda::decode_block {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTileTokens = 64;                  // keys per shared-memory tile: 16 per warp
constexpr int kStages = 3;                       // K/V tiles in shared memory: the one computed and two in flight
constexpr int kGroupRows = 16;                   // query heads of a GQA group padded to one m16 tile
constexpr int kWarpKeys = kTileTokens / kWarps;  // 16 keys of a tile per warp

// Bytes of the K/V tile ring: [kRingStages][K|V][kTileTokens][kHeadDim] bf16 (the bulk-copy kernel also runs with a
// 2-stage ring, kBulkCopyTwoStage).
template <int kHeadDim, int kRingStages = kStages>
constexpr int ring_bytes() {
  return kRingStages * 2 * kTileTokens * kHeadDim * 2;
}

// Three stages keep an fp8 block at 49.5 KB of shared memory (head_dim 128, Fp8Layout), so four blocks fit on an SM
// (docs/CUDA_DESIGN.md, "Decode attention: which kernel").
constexpr int kFp8Stages = 3;

// Shared memory of the fp8 kernel: the fp8 ring [kFp8Stages][K|V][kTileTokens][kHeadDim] bytes (16-byte chunks
// swizzled by fp8_chunk_offset) and the scale ring [kFp8Stages][K|V][kTileTokens] fp32. No staging tiles, so a
// head_dim 128 block takes 49.5 KB and four blocks fit on an SM (five do not: 228 KB per SM, 1 KB reserved per block).
template <int kHeadDim>
struct Fp8Layout {
  static constexpr int kTileBytes = kTileTokens * kHeadDim;
  static constexpr int kRingBytes = kFp8Stages * 2 * kTileBytes;
  static constexpr int kScaleBytes = kFp8Stages * 2 * kTileTokens * 4;
  static constexpr int kSharedBytes = kRingBytes + kScaleBytes;
  static constexpr int kBlocksPerSm = 4;  // its __launch_bounds__: at most 128 registers per thread
  static_assert(kWarps * kGroupRows * kHeadDim * 4 <= kRingBytes, "finish_block's merge scratch must fit in the ring");
};

// The query heads of a GQA group as n8 blocks of the fp8 kernels' transposed products (fp8_fragments.cuh).
constexpr int fp8_head_blocks(int group) { return group <= 8 ? 1 : 2; }

// Resident blocks per SM of the Hopper fp8 kernel (fp8_bulk_copy_sm90.cu): its __launch_bounds__ and what the split
// planner counts for it. 4 measured faster than 5 with the same tile step (114 vs 95 registers, neither spilling):
// 64 x 640 26.6 vs 30.7 µs in one plan; 6 spill (docs/CUDA_DESIGN.md, "Decode attention: which kernel").
constexpr int kFp8BulkCopyBlocksPerSm = 4;

}  // namespace qinfer::cuda::decode_block
