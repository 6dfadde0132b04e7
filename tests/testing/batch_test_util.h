// Building blocks of the backend tests' batches, shared by the CPU and CUDA backend tests.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace qinfer::testing {

// n deterministic token ids spread over the vocabulary; `salt` gives another prompt.
inline std::vector<int32_t> spread_prompt(int n, int salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = (i * 7919 + salt * 104729) % 151000;
  return ids;
}

// A sequence of a batch: num_tokens after num_cached cached ones over the blocks of `table`; it samples with
// `sampling` unless that is null.
inline BatchSequence batch_sequence(int num_tokens, int num_cached, std::span<const int32_t> table,
                                    const SamplingParams* sampling) {
  BatchSequence s;
  s.num_tokens = num_tokens;
  s.num_cached = num_cached;
  s.block_table = table;
  s.sample = sampling != nullptr;
  s.sampling = sampling;
  return s;
}

}  // namespace qinfer::testing
