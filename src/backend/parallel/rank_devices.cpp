#include "backend/parallel/rank_devices.h"

#include <string>

#include "util/error.h"

namespace qinfer {

std::vector<int> tensor_parallel_devices(int size, bool same_device, int visible_gpus,
                                         const std::function<bool(int, int)>& can_access_peer) {
  const std::string flag = "--tensor-parallel-size " + std::to_string(size);
  if (visible_gpus < 1) throw Error(ErrorKind::kUnavailable, flag + ": no GPU is visible");
  if (same_device) {
    if (size > 8)
      throw Error(ErrorKind::kInvalidArgument,
                  flag + " with --tensor-parallel-same-device: at most 8 ranks share one GPU");
    return std::vector<int>(static_cast<size_t>(size), 0);
  }
  if (size > visible_gpus)
    throw Error(ErrorKind::kUnavailable, flag + " needs " + std::to_string(size) + " GPUs; " +
                                             std::to_string(visible_gpus) + " visible (CUDA_VISIBLE_DEVICES)");
  std::vector<int> devices;
  for (int d = 0; d < size; ++d) devices.push_back(d);
  for (int a : devices)
    for (int b : devices)
      if (a != b && !can_access_peer(a, b))
        throw Error(ErrorKind::kUnavailable, flag + ": GPU " + std::to_string(a) + " cannot access the memory of GPU " +
                                                 std::to_string(b) +
                                                 " (no peer access: the ranks' GPUs must be linked by NVLink or "
                                                 "PCIe peer-to-peer; choose them with CUDA_VISIBLE_DEVICES)");
  return devices;
}

}  // namespace qinfer
