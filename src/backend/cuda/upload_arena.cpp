#include "backend/cuda/upload_arena.h"

#include <cstring>

#include "backend/cuda/cuda_check.h"

namespace qinfer::cuda {

size_t UploadArena::add_bytes(const void* source, size_t bytes) {
  const size_t offset = used_;
  pending_.push_back({source, bytes, offset});
  used_ = (used_ + bytes + 15) / 16 * 16;  // 16-byte aligned arrays
  return offset;
}

size_t UploadArena::add_parts(const std::vector<std::span<const std::byte>>& parts) {
  const size_t offset = used_;
  for (const std::span<const std::byte> part : parts) {
    pending_.push_back({part.data(), part.size(), used_});
    used_ += part.size();
  }
  used_ = (used_ + 15) / 16 * 16;  // 16-byte aligned arrays
  return offset;
}

void UploadArena::upload(cudaStream_t stream) {
  if (used_ > host_.bytes()) {
    // Earlier transfers may still read the old buffers.
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const size_t capacity = std::max(used_ * 2, size_t{1} << 20);
    host_ = PinnedBuffer(capacity, "batch metadata");
    device_ = DeviceBuffer(capacity, "batch metadata");
    ++generation_;
  }
  for (const Pending& p : pending_)
    if (p.bytes > 0) std::memcpy(static_cast<std::byte*>(host_.data()) + p.offset, p.source, p.bytes);
  if (used_ > 0) CUDA_CHECK(cudaMemcpyAsync(device_.data(), host_.data(), used_, cudaMemcpyHostToDevice, stream));
}

}  // namespace qinfer::cuda
