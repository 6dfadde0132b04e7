#include "engine/prefill_cost.h"

#include <algorithm>
#include <cmath>

#include "model/config.h"
#include "util/error.h"

namespace qinfer {

double prefill_attention_cost_ratio(const ModelConfig& config) {
  const double hidden = config.hidden_size;
  const double linear_weights_per_layer = hidden * (config.q_width() + 2.0 * config.kv_width()) +
                                          static_cast<double>(config.q_width()) * hidden +
                                          3.0 * hidden * config.intermediate_size;
  const double linear_flops = 2.0 * linear_weights_per_layer * config.num_layers;
  if (!(linear_flops > 0)) return 0;
  const double attention_flops = 4.0 * config.num_layers * config.num_heads * config.head_dim;
  return attention_flops / linear_flops;
}

double PrefillCost::cost(int64_t tokens, int64_t cached) const {
  const double n = static_cast<double>(tokens);
  return n + ratio_ * n * (static_cast<double>(cached) + n / 2);
}

int32_t PrefillCost::equal_cost_chunk(int32_t fresh_tokens, int64_t cached) const {
  QINFER_CHECK(fresh_tokens >= 1 && cached >= 0);
  if (ratio_ <= 0 || cached == 0) return fresh_tokens;
  return std::max(1, tokens_within(cost(fresh_tokens, 0), cached, fresh_tokens));
}

int32_t PrefillCost::tokens_within(double budget, int64_t cached, int32_t max_tokens) const {
  QINFER_CHECK(max_tokens >= 1 && cached >= 0);
  if (!(budget > 0)) return 0;
  // The positive root of ratio/2 n^2 + (1 + ratio c) n - budget = 0, in the form that does not cancel.
  const double linear = 1 + ratio_ * static_cast<double>(cached);
  const double root = 2 * budget / (linear + std::sqrt(linear * linear + 2 * ratio_ * budget));
  auto tokens = static_cast<int32_t>(std::clamp(std::floor(root), 0.0, static_cast<double>(max_tokens)));
  while (tokens > 0 && cost(tokens, cached) > budget) --tokens;  // rounding in the root
  return tokens;
}

}  // namespace qinfer
