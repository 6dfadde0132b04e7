#include "backend/cuda/tensor_parallel_rank.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"

namespace qinfer::cuda {

OneShotPeerBuffers::OneShotPeerBuffers(const std::vector<int>& devices, int hidden) {
  QINFER_CHECK(devices.size() <= static_cast<size_t>(kMaxSameDeviceRanks));
  peers_.num_ranks = static_cast<int>(devices.size());
  const size_t partial_bytes = static_cast<size_t>(kOneShotAllReduceMaxRows) * static_cast<size_t>(hidden) * 4;
  const size_t flag_bytes = kOneShotAllReduceMaxRows * sizeof(uint32_t);
  int previous = 0;
  CUDA_CHECK(cudaGetDevice(&previous));
  for (size_t r = 0; r < devices.size(); ++r) {
    CUDA_CHECK(cudaSetDevice(devices[r]));
    DeviceBuffer& buffer =
        buffers_.emplace_back(OneShotPeers::kBuffers * partial_bytes + 2 * flag_bytes, "one-shot all-reduce buffers");
    CUDA_CHECK(cudaMemset(buffer.data(), 0, buffer.bytes()));
    auto* bytes = buffer.as<std::byte>();
    for (int b = 0; b < OneShotPeers::kBuffers; ++b)
      peers_.partials[b][r] = reinterpret_cast<float*>(bytes + static_cast<size_t>(b) * partial_bytes);
    peers_.arrivals[r] = reinterpret_cast<uint32_t*>(bytes + OneShotPeers::kBuffers * partial_bytes);
    peers_.calls[r] = reinterpret_cast<uint32_t*>(bytes + OneShotPeers::kBuffers * partial_bytes + flag_bytes);
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaSetDevice(previous));
}

RankCollectives::RankCollectives(const CudaTensorParallelRank& rank, const ModelConfig& config, int max_tokens,
                                 int max_logit_rows)
    : rank_(rank), hidden_(config.hidden_size), vocab_(config.vocab_size) {
  QINFER_CHECK(rank.communicator != nullptr && rank.communicator->size() == rank.spec.size &&
               rank.communicator->rank() == rank.spec.rank);
  const size_t slice = static_cast<size_t>(max_logit_rows) * static_cast<size_t>(rank.spec.vocab_rows);
  partial_delta_ =
      DeviceBuffer(static_cast<size_t>(max_tokens) * static_cast<size_t>(hidden_) * sizeof(float), "partial sums");
  logits_slice_ = DeviceBuffer(slice * sizeof(float), "logits of the rank's vocabulary");
  gathered_logits_ = DeviceBuffer(slice * static_cast<size_t>(rank.spec.size) * sizeof(float), "gathered logits");
}

void RankCollectives::all_reduce_rows(float* rows, int num_rows, const KernelStream& stream) {
  if (num_rows == 0) return;
  rank_.communicator->all_reduce_sum(rows, static_cast<size_t>(num_rows) * static_cast<size_t>(hidden_),
                                     CommDtype::kF32, stream.stream);
}

void RankCollectives::fused_allreduce_add_rmsnorm(int buffer, const FusedAddRmsNormParams& norm,
                                                  const KernelStream& stream) {
  const OneShotPeers& peers = *rank_.one_shot;
  FusedAllReduceAddRmsNormParams p;
  for (int r = 0; r < peers.num_ranks; ++r) {
    p.partials[r] = peers.partials[buffer][r];
    p.arrivals[r] = peers.arrivals[r];
  }
  p.calls = peers.calls[rank_.spec.rank];
  p.rank = rank_.spec.rank;
  p.num_ranks = peers.num_ranks;
  p.residual = norm.residual;
  p.weight = norm.weight;
  p.out = norm.out;
  p.num_rows = norm.num_rows;
  p.hidden = norm.hidden;
  p.eps = norm.eps;
  launch_fused_allreduce_add_rmsnorm(p, stream);
}

void RankCollectives::gather_logits(float* logits, int num_rows, const KernelStream& stream) {
  if (num_rows == 0) return;
  const size_t vocab_rows = static_cast<size_t>(rank_.spec.vocab_rows);
  const size_t slice = static_cast<size_t>(num_rows) * vocab_rows;  // floats of one rank's [num_rows, vocab_rows]
  rank_.communicator->all_gather(logits_slice_.data(), gathered_logits_.data(), slice, CommDtype::kF32, stream.stream);
  // Rank r's columns are the token ids [r * vocab_rows, ...), the last rank's cut at the vocabulary.
  for (int r = 0; r < rank_.spec.size; ++r) {
    const size_t first = static_cast<size_t>(r) * vocab_rows;
    const size_t width = std::min(vocab_rows, static_cast<size_t>(vocab_) - std::min(first, size_t(vocab_)));
    if (width == 0) continue;
    CUDA_CHECK(cudaMemcpy2DAsync(logits + first, static_cast<size_t>(vocab_) * sizeof(float),
                                 gathered_logits_.as<float>() + static_cast<size_t>(r) * slice,
                                 vocab_rows * sizeof(float), width * sizeof(float), static_cast<size_t>(num_rows),
                                 cudaMemcpyDeviceToDevice, stream.stream));
  }
}

}  // namespace qinfer::cuda
