// What makes a CUDA backend one rank of a tensor-parallel group (docs/TENSOR_PARALLEL.md): its shard's spec, its
// communicator, and the collectives of the forward with the buffers they need. The forward (qwen3_forward.h) calls
// them where a rank's partial result meets the replicated residual stream: after the embedding, o_proj and down
// (an fp32 all-reduce of the rows, in place) and after lm_head (the ranks' vocabulary slices gathered into the
// logits of the whole vocabulary, so that sampling runs as without tensor parallelism).
#pragma once

#include <cstddef>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_capabilities.h"
#include "backend/parallel/communicator.h"
#include "model/config.h"
#include "model/tensor_shard.h"

namespace qinfer::cuda {

struct CudaTensorParallelRank {
  ShardSpec spec;
  Communicator* communicator = nullptr;  // the rank's, on the rank's device; outlives the backend
};

class RankCollectives {
 public:
  // Buffers for steps of up to max_tokens tokens and max_logit_rows sampled rows at once.
  RankCollectives(const CudaTensorParallelRank& rank, const ModelConfig& config, int max_tokens, int max_logit_rows);

  const ShardSpec& spec() const { return rank_.spec; }
  // Where o_proj and down write the rank's partial sums before all_reduce_rows: [max_tokens, hidden] fp32.
  float* partial_delta() const { return partial_delta_.as<float>(); }
  // Where lm_head writes the rank's logits before gather_logits: [max_logit_rows, vocab_rows] fp32.
  float* logits_slice() const { return logits_slice_.as<float>(); }

  // rows [num_rows, hidden] fp32 = the sum over ranks, in place (every rank gets the same bits).
  void all_reduce_rows(float* rows, int num_rows, const KernelStream& stream);
  // logits [num_rows, vocab] fp32 = the ranks' logits_slice() [num_rows, vocab_rows] side by side in rank order,
  // without the padding rows past the vocabulary.
  void gather_logits(float* logits, int num_rows, const KernelStream& stream);

  size_t bytes() const { return partial_delta_.bytes() + logits_slice_.bytes() + gathered_logits_.bytes(); }

 private:
  CudaTensorParallelRank rank_;
  int hidden_ = 0;
  int vocab_ = 0;
  DeviceBuffer partial_delta_;    // [max_tokens, hidden] fp32
  DeviceBuffer logits_slice_;     // [max_logit_rows, vocab_rows] fp32
  DeviceBuffer gathered_logits_;  // [size, max_logit_rows * vocab_rows] fp32: every rank's slice
};

}  // namespace qinfer::cuda
