// The estimated cost of a prefill chunk, used by the scheduler to cut chunks by cost rather than by token count.
//
// Cost unit: one token through the linear layers (q/k/v/o, gate/up/down), which costs the same for every token. A chunk
// of n tokens after c cached ones costs
//     n + ratio * n * (c + n / 2)
// since each of its tokens attends to the c cached tokens and, causally, to half the chunk on average. `ratio` is the
// attention FLOPs per (token, context token) over the linear FLOPs per token. A token budget alone treats a chunk late
// in a 128K prompt like the first one, while its attention makes it several times dearer, and every decode sharing
// the step waits for it.
#pragma once

#include <cstdint>

namespace qinfer {

struct ModelConfig;

// ratio for a model: 4 * num_layers * num_heads * head_dim (QK^T and PV, a multiply-add = 2 FLOPs each, per query
// head and layer) over 2 * the linear weights of all layers (the embedding is a lookup, and in a prefill the lm_head
// runs only for the last position). Qwen3-4B: 4*36*32*128 = 589,824 over 2 * 3.63e9 = 7.27e9, i.e. 8.1e-5: a chunk
// after 100K cached tokens costs about 9 times its linear part. 0 for a config without linear weights.
double prefill_attention_cost_ratio(const ModelConfig& config);

class PrefillCost {
 public:
  // ratio 0: attention is not counted, and a chunk's cost is its token count.
  explicit PrefillCost(double attention_ratio) : ratio_(attention_ratio) {}

  double attention_ratio() const { return ratio_; }
  double cost(int64_t tokens, int64_t cached) const;
  // The most tokens, at least 1 and at most `fresh_tokens`, whose chunk after `cached` tokens costs no more than a
  // chunk of `fresh_tokens` tokens of a fresh prompt (nothing cached). `fresh_tokens` >= 1.
  int32_t equal_cost_chunk(int32_t fresh_tokens, int64_t cached) const;
  // The most tokens, at most `max_tokens`, whose chunk after `cached` tokens costs no more than `budget` (0 when not
  // even one token fits). `max_tokens` >= 1.
  int32_t tokens_within(double budget, int64_t cached, int32_t max_tokens) const;

 private:
  double ratio_;
};

}  // namespace qinfer
