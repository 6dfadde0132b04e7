// Which GPU each rank of a CUDA tensor-parallel group runs on, and the start-up refusals of a placement that cannot
// work (docs/TENSOR_PARALLEL.md, "Bad input"). GPU-free, so that its tests run without a GPU.
#pragma once

#include <functional>
#include <vector>

namespace qinfer {

// Rank r on visible GPU r; with `same_device` (the tests' and diagnostics' mode of SameDeviceCommunicator), every
// rank on GPU 0. Throws Error(kUnavailable) naming both numbers when `size` ranks need more than `visible_gpus` GPUs,
// and naming the two GPUs when can_access_peer(a, b) is false for two of the ranks' GPUs (the all-reduces of every
// layer are meant for GPUs that read each other's memory directly); Error(kInvalidArgument) for more than 8 ranks
// on one device.
std::vector<int> tensor_parallel_devices(int size, bool same_device, int visible_gpus,
                                         const std::function<bool(int, int)>& can_access_peer);

}  // namespace qinfer
