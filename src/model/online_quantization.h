// Quantization of a dense checkpoint while it loads: `--quantization fp8` on a bf16/f16/f32 checkpoint, as vLLM's
// online FP8. qinfer makes the block-scaled format of Qwen's FP8 checkpoints ([128, 128] blocks, E4M3 weights,
// fp32 scale_inv = amax / 448; weight_quantizer.h), not vLLM's per-tensor scale, so that an online-FP8 model and an
// FP8 checkpoint are the same representation for the backends and their kernels.
#pragma once

#include "model/qwen3_weights.h"

namespace qinfer {

class ThreadPool;

// Every linear of a dense model becomes an Fp8BlockWeight; embeddings, lm_head and norms stay as they are. The result
// keeps `model`'s storage alive beside the new buffers; its config's quantization is fp8 with `online` set.
// QINFER_CHECKs that the model has no quantized linear.
LoadedModel quantize_fp8_on_load(const LoadedModel& model, ThreadPool* pool);

}  // namespace qinfer
