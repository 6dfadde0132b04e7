// Collective communication between the ranks of a tensor-parallel group (docs/TENSOR_PARALLEL.md). One Communicator
// per rank; every rank of the group calls the same collectives in the same order with the same counts, as NCCL
// requires. Buffers live where the implementation computes: host memory for InProcessCommunicator, device memory
// (on the rank's GPU) for NcclCommunicator.
#pragma once

#include <cstddef>

namespace qinfer {

enum class CommDtype { kF32, kBf16 };

// Bytes of one element of `dtype`.
size_t comm_dtype_bytes(CommDtype dtype);

// The stream a device collective is ordered on (a cudaStream_t for NcclCommunicator); host communicators ignore it.
// An opaque pointer keeps this header free of CUDA.
using CommStream = void*;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // buffer[i] = the sum over ranks of buffer[i], in place, `count` elements of `dtype`, on every rank.
  virtual void all_reduce_sum(void* buffer, size_t count, CommDtype dtype, CommStream stream = nullptr) = 0;

  // recv = [size, count]: slot r holds rank r's `send` ([count]). `send` and `recv` must not overlap.
  virtual void all_gather(const void* send, void* recv, size_t count, CommDtype dtype, CommStream stream = nullptr) = 0;

  // Every rank's buffer = root's buffer ([count]).
  virtual void broadcast(void* buffer, size_t count, CommDtype dtype, int root, CommStream stream = nullptr) = 0;

  // Returns once every rank has called it (device communicators: once the work queued before it has finished).
  virtual void barrier() = 0;
};

}  // namespace qinfer
