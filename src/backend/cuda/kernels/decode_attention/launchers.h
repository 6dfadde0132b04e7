// Inside the decode attention family: the arguments its kernels take and one launcher per kernel, as launch.cu
// dispatches to them (each needs what launch_decode_attention checked; none launches the merge kernel).
#pragma once

#include "backend/cuda/kernels/decode_attention/launch.h"

namespace qinfer::cuda {

// The kernels' argument: the launch's params and its plan's splits, grid (num_splits, num_kv_heads, num_decode).
struct DecodeAttentionArgs : DecodeAttentionParams {
  int tokens_per_split = 0;  // multiple of 64
  int num_splits = 1;
};

// The bf16 cp.async kernel (cp_async.cu): a 3-tile cp.async ring per block.
void launch_decode_attention_cp_async(const DecodeAttentionArgs& args, const KernelStream& stream);

// The fp8 cp.async kernel (fp8_cp_async.cu). Each warp builds fp16 tensor-core fragments straight from the E4M3 bytes
// (fp8_fragments.cuh), with the scales folded into scores and probabilities (fp8_tile.cuh).
void launch_decode_attention_fp8(const DecodeAttentionArgs& args, const KernelStream& stream);

// The Hopper fp8 kernel (fp8_bulk_copy_sm90.cu): the fp8 kernel's tile step over tiles and scales brought in by the
// bulk copy engine. Needs head_dim 128, GQA groups of at most 8 and decode_attention_bulk_copy_available.
void launch_decode_attention_fp8_bulk_copy(const DecodeAttentionArgs& args, const KernelStream& stream);

// The register kernel (registers.cu; bf16 cache, sm_80+): K/V go from the paged cache straight into mma fragments,
// without a shared-memory tile ring, and the first tile is loaded before waiting for the previous kernel.
void launch_decode_attention_registers(const DecodeAttentionArgs& args, const KernelStream& stream);

// The same over an fp8 cache (fp8_registers.cu): the fp8 kernels' warp step on bytes loaded straight into registers.
void launch_decode_attention_fp8_registers(const DecodeAttentionArgs& args, const KernelStream& stream);

// The Hopper bf16 kernel (bulk_copy_sm90.cu). `ring_stages`: 3 (kBulkCopy) or 2 (kBulkCopyTwoStage). Needs
// decode_attention_bulk_copy_available.
void launch_decode_attention_bulk_copy(const DecodeAttentionArgs& args, const KernelStream& stream, int ring_stages);

}  // namespace qinfer::cuda
