// Device-side random fill for benchmark inputs (never zeros: they can run faster than real data).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace qinfer::cuda::bench {

// Uniform values in [-scale, scale] from a counter hash of (seed, index).
void fill_random_bf16(__nv_bfloat16* data, size_t count, uint64_t seed, float scale, cudaStream_t stream);
void fill_random_f32(float* data, size_t count, uint64_t seed, float scale, cudaStream_t stream);

// Adds `boost` to every `stride`-th value: a few outliers over a flat spread, as a language model's logits have them.
void add_spikes_f32(float* data, size_t count, size_t stride, float boost, cudaStream_t stream);

}  // namespace qinfer::cuda::bench
