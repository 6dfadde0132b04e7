// Megatron-style tensor-parallel slices of a Qwen3 dense model (docs/TENSOR_PARALLEL.md). Rank r of N holds:
//  - q_proj, k_proj, v_proj: the rows of its heads (column-parallel): q heads [r*H/N, (r+1)*H/N), KV heads
//    [r*KV/N, (r+1)*KV/N); with H/KV q heads per KV head, the rank's q heads read exactly its KV heads;
//  - gate_proj, up_proj: rows [r*F/N, (r+1)*F/N) of the intermediate dimension (column-parallel);
//  - o_proj, down_proj: the matching columns (row-parallel): each rank's product is a partial sum over its heads or
//    intermediate columns, and the sum over ranks (an all-reduce) is the layer's output;
//  - embed_tokens and lm_head: rows [r*V', (r+1)*V') of the vocabulary, V' = ceil(vocab/N), rows past the
//    vocabulary zero: a token's embedding is the sum over ranks (only its owner's row is non-zero), and the logits
//    are the ranks' slices gathered in rank order;
//  - the norms (input, post-attention, q/k over head_dim, final) whole.
#pragma once

#include <cstdint>
#include <memory>

#include "model/config.h"
#include "model/qwen3_weights.h"

namespace qinfer {

struct ShardSpec {
  int rank = 0;
  int size = 1;
  int num_heads = 0;          // q heads of the rank, H/N
  int num_kv_heads = 0;       // KV heads of the rank, KV/N
  int intermediate_size = 0;  // MLP width of the rank, F/N
  int64_t vocab_rows = 0;     // embedding / lm_head rows of every rank, ceil(vocab/N)

  int64_t vocab_begin() const { return rank * vocab_rows; }  // first token id of the rank's rows
};

// Throws Error(kInvalidArgument) naming the numbers unless 1 <= size and size divides num_key_value_heads,
// num_attention_heads and intermediate_size.
void check_tensor_parallel_size(const ModelConfig& config, int size);

// Rank `rank`'s share of a model split `size` ways; checks the size as check_tensor_parallel_size does.
ShardSpec shard_spec(const ModelConfig& config, int rank, int size);

// The weights rank spec.rank holds, as a model of its own: config with the rank's num_heads, num_kv_heads and
// intermediate_size (hidden size, head_dim and vocab_size stay the model's), embed_tokens / lm_head
// [spec.vocab_rows, hidden], and the slices above in the checkpoint's dtype. Row slices point into `model`'s storage,
// column slices and padded vocabulary rows are copies; the result keeps `model` alive. Dense linears only: a
// quantized linear is refused with Error(kUnsupported).
LoadedModel shard_weights(std::shared_ptr<const LoadedModel> model, const ShardSpec& spec);

}  // namespace qinfer
