// Timing of device work: `launches` calls captured into one CUDA graph, replayed several times; the median replay
// over `launches` is the time of one call.
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace qinfer::cuda::bench {

// launch(i) enqueues call i on the stream (i selects a rotating input set). Returns seconds per call.
double time_per_call(const std::function<void(int)>& launch, int launches, cudaStream_t stream);

}  // namespace qinfer::cuda::bench
