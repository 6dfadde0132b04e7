// Owning handles for device memory and pinned host memory.
#pragma once

#include <cstddef>
#include <utility>

namespace qinfer::cuda {

// cudaMalloc / cudaFree. Allocation failure throws Error(kOutOfMemory) naming what was being allocated and the
// device's free and total memory.
struct DeviceAllocator {
  static void* allocate(size_t bytes, const char* what);
  static void release(void* data);
};

// cudaMallocHost / cudaFreeHost: host memory the copy engines can read asynchronously.
struct PinnedAllocator {
  static void* allocate(size_t bytes, const char* what);
  static void release(void* data);
};

// Move-only owner of `bytes` from one allocator.
template <typename Allocator>
class OwnedMemory {
 public:
  OwnedMemory() = default;
  OwnedMemory(size_t bytes, const char* what)
      : data_(bytes ? Allocator::allocate(bytes, what) : nullptr), bytes_(bytes) {}
  ~OwnedMemory() {
    if (data_) Allocator::release(data_);
  }
  OwnedMemory(OwnedMemory&& other) noexcept { *this = std::move(other); }
  OwnedMemory& operator=(OwnedMemory&& other) noexcept {
    if (this != &other) {
      if (data_) Allocator::release(data_);
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  OwnedMemory(const OwnedMemory&) = delete;
  OwnedMemory& operator=(const OwnedMemory&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

using DeviceBuffer = OwnedMemory<DeviceAllocator>;
using PinnedBuffer = OwnedMemory<PinnedAllocator>;

}  // namespace qinfer::cuda
