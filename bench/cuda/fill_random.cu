#include "backend/cuda/cuda_check.h"
#include "fill_random.h"

namespace qinfer::cuda::bench {

namespace {

template <typename T>
__global__ void fill_random_kernel(T* data, size_t count, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float unit = static_cast<float>(static_cast<int32_t>(z >> 40) - (1 << 23)) * 0x1p-23f;
    data[i] = static_cast<T>(unit * scale);
  }
}

__global__ void add_spikes_kernel(float* data, size_t count, size_t stride, float boost) {
  for (size_t i = (blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x) * stride; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x * stride)
    data[i] += boost;
}

}  // namespace

void add_spikes_f32(float* data, size_t count, size_t stride, float boost, cudaStream_t stream) {
  add_spikes_kernel<<<256, 256, 0, stream>>>(data, count, stride, boost);
  CUDA_CHECK_LAUNCH();
}

void fill_random_bf16(__nv_bfloat16* data, size_t count, uint64_t seed, float scale, cudaStream_t stream) {
  fill_random_kernel<<<1024, 256, 0, stream>>>(data, count, seed, scale);
  CUDA_CHECK_LAUNCH();
}

void fill_random_f32(float* data, size_t count, uint64_t seed, float scale, cudaStream_t stream) {
  fill_random_kernel<<<1024, 256, 0, stream>>>(data, count, seed, scale);
  CUDA_CHECK_LAUNCH();
}

}  // namespace qinfer::cuda::bench
