// Tensor maps for Hopper's bulk tensor copy engine (TMA), encoded on the host through the driver entry point that the
// CUDA runtime hands out, so nothing links against libcuda.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>

#include <cstdint>

namespace qinfer::cuda {

// A 2-D map over the row-major bf16 matrix [rows, columns] at `base` (16-byte aligned, columns a multiple of 64) whose
// box is [box_rows, 64 columns] stored with the 128-byte swizzle: 128-byte rows, the 16-byte chunk c of row r at chunk
// c ^ (r % 8) — the tile layout of hopper_wgmma.cuh when the destination starts at a 1024-byte boundary. Elements
// outside the matrix read as zero.
CUtensorMap make_bf16_tensor_map_swizzle128(const __nv_bfloat16* base, int64_t rows, int columns, int box_rows);

// A 2-D map over the row-major byte matrix [rows, 128] at `base` (16-byte aligned) whose box is [box_rows, 128] stored
// with the same 128-byte swizzle (the swizzle moves 16-byte chunks, whatever the element type): chunk c of row r at
// chunk c ^ (r % 8) when the destination starts at a 1024-byte boundary.
CUtensorMap make_u8_tensor_map_swizzle128(const uint8_t* base, int64_t rows, int box_rows);

}  // namespace qinfer::cuda
