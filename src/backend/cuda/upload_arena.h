// Per-step metadata transfer: arrays are packed into one pinned buffer and copied to the device in one transfer.
// Buffers grow on demand (after synchronising the stream) and are reused across steps.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backend/cuda/device_buffer.h"

namespace qinfer::cuda {

class UploadArena {
 public:
  // Starts a new packing. The caller must have synchronised the stream since the previous upload().
  void begin() { pending_.clear(), used_ = 0; }

  // Queues `values`; returns a handle for device<T>() after upload(). The vector must live until upload().
  template <typename T>
  size_t add(const std::vector<T>& values) {
    return add_bytes(values.data(), values.size() * sizeof(T));
  }

  // Queues the concatenation of `parts` as one array (each part a whole number of the array's elements, whose size
  // divides 16); returns its handle. The parts must live until upload().
  size_t add_parts(const std::vector<std::span<const std::byte>>& parts);

  // Packs everything queued since begin() and copies it to the device on `stream`.
  void upload(cudaStream_t stream);

  // Changes whenever upload() had to move the buffers: device addresses captured in graphs are stale then.
  uint64_t generation() const { return generation_; }

  // Device address of a queued array (valid after upload(), until the next upload()).
  template <typename T>
  const T* device(size_t handle) const {
    return reinterpret_cast<const T*>(static_cast<const std::byte*>(device_.data()) + handle);
  }

 private:
  struct Pending {
    const void* source;
    size_t bytes;
    size_t offset;
  };
  size_t add_bytes(const void* source, size_t bytes);

  std::vector<Pending> pending_;
  size_t used_ = 0;
  uint64_t generation_ = 0;
  PinnedBuffer host_;
  DeviceBuffer device_;
};

}  // namespace qinfer::cuda
