// Captured CUDA graphs of decode steps, one per padded shape. A decode step launches ~300 kernels; replaying them as
// one graph removes the host launch cost and most inter-kernel gaps.
#pragma once

#include <cuda_runtime.h>

#include <compare>
#include <functional>
#include <map>

namespace qinfer::cuda {

// Everything a captured decode step bakes in besides the fixed buffers: padded batch, block-table stride, and the
// context bucket the attention splits were planned for.
struct DecodeGraphKey {
  int padded_sequences = 0;
  int block_table_stride = 0;
  int context_bucket = 0;
  auto operator<=>(const DecodeGraphKey&) const = default;
};

class DecodeGraphCache {
 public:
  DecodeGraphCache() = default;
  ~DecodeGraphCache() { clear(); }
  DecodeGraphCache(const DecodeGraphCache&) = delete;
  DecodeGraphCache& operator=(const DecodeGraphCache&) = delete;

  // Launches the graph for `key` on `stream`, capturing `enqueue` (which must only enqueue work on `stream`) the
  // first time the key is seen.
  void launch(const DecodeGraphKey& key, const std::function<void()>& enqueue, cudaStream_t stream);
  // Drops every graph (after the buffers they point into moved).
  void clear();

 private:
  std::map<DecodeGraphKey, cudaGraphExec_t> graphs_;
};

}  // namespace qinfer::cuda
