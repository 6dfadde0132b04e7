#include "backend/cuda/tensor_parallel_rank.h"

#include <algorithm>

#include "backend/cuda/cuda_check.h"

namespace qinfer::cuda {

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
