// What makes a CUDA backend one rank of a tensor-parallel group (docs/TENSOR_PARALLEL.md): its shard's spec, its
// communicator, and the collectives of the forward with the buffers they need. The forward (qwen3_forward.h) calls
// them where a rank's partial result meets the replicated residual stream: after the embedding, o_proj and down
// (an fp32 all-reduce of the rows, in place) and after lm_head (the ranks' vocabulary slices gathered into the
// logits of the whole vocabulary, so that sampling runs as without tensor parallelism). At decode sizes the layers'
// all-reduces and the norms after them are one kernel (fused_allreduce_add_rmsnorm) where the ranks' buffers are
// registered for it.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_capabilities.h"
#include "backend/cuda/kernels/fused_add_rmsnorm.h"
#include "backend/cuda/kernels/fused_allreduce_add_rmsnorm.h"
#include "backend/parallel/communicator.h"
#include "model/config.h"
#include "model/tensor_shard.h"

namespace qinfer::cuda {

// Every rank's buffers of the one-shot all-reduce (kernels/fused_allreduce_add_rmsnorm.h), allocated once on each
// rank's device and readable by every rank (peer access, or one device).
struct OneShotPeers {
  static constexpr int kBuffers = 2;  // o_proj and down alternate between them
  int num_ranks = 0;
  float* partials[kBuffers][kMaxSameDeviceRanks] = {};  // [buffer][rank]: [kOneShotAllReduceMaxRows, hidden] fp32
  uint32_t* arrivals[kMaxSameDeviceRanks] = {};         // [rank]: [kOneShotAllReduceMaxRows]
  uint32_t* calls[kMaxSameDeviceRanks] = {};            // [rank]: [kOneShotAllReduceMaxRows]
};

// Owns the buffers of OneShotPeers: rank r's on devices[r], zeroed.
class OneShotPeerBuffers {
 public:
  OneShotPeerBuffers(const std::vector<int>& devices, int hidden);
  const OneShotPeers& peers() const { return peers_; }

 private:
  std::vector<DeviceBuffer> buffers_;  // per rank: partials, then arrivals and calls
  OneShotPeers peers_;
};

struct CudaTensorParallelRank {
  ShardSpec spec;
  Communicator* communicator = nullptr;  // the rank's, on the rank's device; outlives the backend
  // The one-shot all-reduce's buffers, used for steps of at most kOneShotAllReduceMaxRows tokens; null: every
  // all-reduce goes through the communicator. Outlives the backend.
  const OneShotPeers* one_shot = nullptr;
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

  // Whether a step of `num_rows` tokens takes the one-shot all-reduce fused with the residual add and RMSNorm.
  bool one_shot(int num_rows) const { return rank_.one_shot != nullptr && num_rows <= kOneShotAllReduceMaxRows; }
  // Where o_proj (buffer 0) or down (buffer 1) writes its partial rows for fused_allreduce_add_rmsnorm:
  // [kOneShotAllReduceMaxRows, hidden] fp32.
  float* one_shot_partial(int buffer) const { return rank_.one_shot->partials[buffer][rank_.spec.rank]; }
  // norm.residual += the sum over ranks of their one_shot_partial(buffer) rows, norm.out = RMSNorm(residual) *
  // norm.weight, for norm.num_rows rows (norm.delta unused): fused_add_rmsnorm after all_reduce_rows, in one kernel.
  void fused_allreduce_add_rmsnorm(int buffer, const FusedAddRmsNormParams& norm, const KernelStream& stream);
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
