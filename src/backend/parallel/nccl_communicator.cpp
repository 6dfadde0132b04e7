#include "backend/parallel/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "util/error.h"

namespace qinfer {

namespace {

void check_nccl(ncclResult_t result, const char* what) {
  if (result != ncclSuccess)
    throw Error(ErrorKind::kUnavailable, std::string("NCCL ") + what + ": " + ncclGetErrorString(result));
}

void check_cuda(cudaError_t result, const char* what) {
  if (result != cudaSuccess)
    throw Error(ErrorKind::kUnavailable, std::string("CUDA ") + what + ": " + cudaGetErrorString(result));
}

ncclDataType_t nccl_dtype(CommDtype dtype) { return dtype == CommDtype::kF32 ? ncclFloat32 : ncclBfloat16; }

cudaStream_t cuda_stream(CommStream stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

ScopedCudaDevice::ScopedCudaDevice(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
}

ScopedCudaDevice::~ScopedCudaDevice() { cudaSetDevice(previous_); }

struct NcclCommunicator::Handle {
  ncclComm_t comm = nullptr;
  cudaStream_t barrier_stream = nullptr;
  float* barrier_value = nullptr;  // [1] on the rank's device

  // Takes ownership of `c` (destroyed also when this throws) and creates the barrier's stream and buffer on the
  // current device.
  explicit Handle(ncclComm_t c) : comm(c) {
    try {
      check_cuda(cudaStreamCreateWithFlags(&barrier_stream, cudaStreamNonBlocking), "cudaStreamCreate");
      check_cuda(cudaMalloc(&barrier_value, sizeof(float)), "cudaMalloc");
    } catch (...) {
      release();
      throw;
    }
  }
  ~Handle() { release(); }
  void release() {
    if (barrier_value) cudaFree(barrier_value);
    if (barrier_stream) cudaStreamDestroy(barrier_stream);
    if (comm) ncclCommDestroy(comm);
    barrier_value = nullptr;
    barrier_stream = nullptr;
    comm = nullptr;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

void set_nccl_environment_defaults() { setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); }

NcclUniqueId make_nccl_unique_id() {
  set_nccl_environment_defaults();
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  NcclUniqueId bytes;
  static_assert(sizeof(id) == sizeof(bytes));
  std::memcpy(bytes.data(), &id, sizeof(id));
  return bytes;
}

NcclCommunicator::NcclCommunicator(const NcclUniqueId& id, int rank, int size, int device)
    : rank_(rank), size_(size), device_(device) {
  set_nccl_environment_defaults();
  ScopedCudaDevice on_device(device);
  ncclUniqueId nccl_id;
  std::memcpy(&nccl_id, id.data(), sizeof(nccl_id));
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, size, nccl_id, rank), "ncclCommInitRank");
  handle_ = std::make_unique<Handle>(comm);
}

NcclCommunicator::NcclCommunicator(std::unique_ptr<Handle> handle, int rank, int size, int device)
    : handle_(std::move(handle)), rank_(rank), size_(size), device_(device) {}

NcclCommunicator::~NcclCommunicator() {
  // Not ScopedCudaDevice: a destructor must not throw.
  int previous = 0;
  const bool switched = cudaGetDevice(&previous) == cudaSuccess && cudaSetDevice(device_) == cudaSuccess;
  handle_.reset();
  if (switched) cudaSetDevice(previous);
}

void NcclCommunicator::all_reduce_sum(void* buffer, size_t count, CommDtype dtype, CommStream stream) {
  check_nccl(ncclAllReduce(buffer, buffer, count, nccl_dtype(dtype), ncclSum, handle_->comm, cuda_stream(stream)),
             "ncclAllReduce");
}

void NcclCommunicator::all_gather(const void* send, void* recv, size_t count, CommDtype dtype, CommStream stream) {
  check_nccl(ncclAllGather(send, recv, count, nccl_dtype(dtype), handle_->comm, cuda_stream(stream)), "ncclAllGather");
}

void NcclCommunicator::broadcast(void* buffer, size_t count, CommDtype dtype, int root, CommStream stream) {
  check_nccl(ncclBroadcast(buffer, buffer, count, nccl_dtype(dtype), root, handle_->comm, cuda_stream(stream)),
             "ncclBroadcast");
}

void NcclCommunicator::barrier() {
  ScopedCudaDevice on_device(device_);
  check_nccl(ncclAllReduce(handle_->barrier_value, handle_->barrier_value, 1, ncclFloat32, ncclSum, handle_->comm,
                           handle_->barrier_stream),
             "ncclAllReduce (barrier)");
  check_cuda(cudaStreamSynchronize(handle_->barrier_stream), "cudaStreamSynchronize (barrier)");
  check_async_error();
}

void NcclCommunicator::check_async_error() const {
  ncclResult_t async = ncclSuccess;
  check_nccl(ncclCommGetAsyncError(handle_->comm, &async), "ncclCommGetAsyncError");
  check_nccl(async, "communicator failed");
}

void NcclCommunicator::abort() {
  if (handle_->comm == nullptr) return;
  ncclCommAbort(handle_->comm);  // nothing to do with its result: the communicator is gone either way
  handle_->comm = nullptr;
}

std::vector<std::unique_ptr<NcclCommunicator>> make_nccl_communicators(std::span<const int> devices) {
  set_nccl_environment_defaults();
  const int size = static_cast<int>(devices.size());
  std::vector<ncclComm_t> comms(devices.size());
  check_nccl(ncclCommInitAll(comms.data(), size, devices.data()), "ncclCommInitAll");
  std::vector<std::unique_ptr<NcclCommunicator>> communicators;
  for (int rank = 0; rank < size; ++rank) {
    const int device = devices[static_cast<size_t>(rank)];
    try {
      ScopedCudaDevice on_device(device);
      auto handle =
          std::make_unique<NcclCommunicator::Handle>(std::exchange(comms[static_cast<size_t>(rank)], nullptr));
      communicators.push_back(
          std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(handle), rank, size, device)));
    } catch (...) {
      for (ncclComm_t comm : comms)
        if (comm) ncclCommDestroy(comm);
      throw;
    }
  }
  return communicators;
}

}  // namespace qinfer
