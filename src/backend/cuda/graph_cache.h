// Captured CUDA graphs of decode steps and speculative verify steps, one per padded shape. A step launches ~300
// kernels; replaying them as one graph removes the host launch cost and most inter-kernel gaps.
#pragma once

#include <cuda_runtime.h>

#include <compare>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/device_capabilities.h"

namespace qinfer::cuda {

// Everything a captured step bakes in besides the fixed buffers: padded batch, positions per sequence (1: a decode
// step; more: equal chunks on the prefill path, each position sampled for a verify step, else the last), block-table
// stride, and the context bucket the attention splits were planned for.
struct DecodeGraphKey {
  int padded_sequences = 0;
  int positions_per_sequence = 1;
  bool all_positions_sampled = false;
  int block_table_stride = 0;
  int context_bucket = 0;
  bool samples = true;  // false: the forward alone (constrained steps sample after the graph)
  auto operator<=>(const DecodeGraphKey&) const = default;
};

// Every dependency edge of a graph: to[i] depends on from[i] as data[i] says.
struct GraphEdges {
  std::vector<cudaGraphNode_t> from, to;
  std::vector<cudaGraphEdgeData> data;
};
GraphEdges graph_edges(cudaGraph_t graph);

// Replaces edge i of `edges` (read from `graph`) by one with the same endpoints and `data`.
void replace_edge(cudaGraph_t graph, const GraphEdges& edges, size_t i, const cudaGraphEdgeData& data);

// The name of the kernel `node` launches, as the driver reports it (mangled); "" for other nodes or when the driver
// cannot tell (it needs CUDA 12.3's cuFuncGetName).
std::string kernel_node_name(cudaGraphNode_t node);

// The kernels the edge policy below treats by their role, marked by the code that launches them.
// The register decode attention kernels let o_proj launch only once its blocks have loaded their first keys and
// rotated their queries (allow_dependents() after the wait), so their outgoing edges stay programmatic: leaving at
// launch completion, o_proj's 1 280 blocks queue 21 MB of weight loads exactly while attention's dependent loads
// (block table, position, keys) are on the critical path, and its blocks reached the wait 2.7 µs later
// (docs/CUDA_DESIGN.md, "Programmatic dependent launch").
enum class GraphNodeRole {
  kDecodeAttention,          // a decode attention kernel (kernels/decode_attention/)
  kRegisterDecodeAttention,  // one of the register decode attention kernels (bf16 or fp8), also a kDecodeAttention
};

// Which captured nodes play which role: filled while a graph is captured, read when its edges are rewritten.
class GraphNodeRoles {
 public:
  // Marks the node the stream captured last (the kernel its caller just launched) with `role`. No-op when the stream
  // is not capturing.
  void mark_last_launch(cudaStream_t stream, GraphNodeRole role);
  bool has(cudaGraphNode_t node, GraphNodeRole role) const;
  void clear() { roles_.clear(); }

 private:
  std::unordered_map<cudaGraphNode_t, GraphNodeRole> roles_;
};

// Decode graphs of at most this many padded sequences start each kernel launched with programmatic dependent launch
// once every block of its predecessor has begun (start_dependents_at_launch_completion). Larger graphs do so only for
// the decode attention kernels. Measured (docs/CUDA_DESIGN.md, "Decode graphs and launch edges"): every edge rewritten
// gains 2-4 % at 3-8 sequences and nothing at 16 and 64 (fp8 at 64: a loss); only the edges into decode attention gain
// 1-3 % at 16-64.
inline constexpr int kLaunchCompletionMaxSequences = 8;

// A test on a graph node.
using GraphNodeFilter = std::function<bool(cudaGraphNode_t)>;

// Rewrites the programmatic edges of `graph` to leave their predecessor's launch-completion port: the successor starts
// once all blocks of its predecessor have begun, instead of once they all called allow_dependents(). cuBLASLt's
// GEMMs let their successor launch only near their end, so otherwise the kernel after each GEMM launches only as the
// GEMM drains. Ordering is unchanged: the successor's wait_for_producer() still waits for its predecessor to complete
// and its writes to be visible. Only edges into nodes `rewrite_into` accepts (all when empty) and out of nodes
// `keep_out_of` rejects (all when empty) are rewritten. Returns the number of edges rewritten.
size_t start_dependents_at_launch_completion(cudaGraph_t graph, const GraphNodeFilter& rewrite_into = {},
                                             const GraphNodeFilter& keep_out_of = {});

class DecodeGraphCache {
 public:
  DecodeGraphCache() = default;
  ~DecodeGraphCache() { clear(); }
  DecodeGraphCache(const DecodeGraphCache&) = delete;
  DecodeGraphCache& operator=(const DecodeGraphCache&) = delete;

  // Launches the graph for `key` on `stream`, capturing `enqueue` (which must only enqueue work on `stream`, and
  // mark the kernels of the edge policy in the roles it is given) the first time the key is seen.
  void launch(const DecodeGraphKey& key, const std::function<void(GraphNodeRoles&)>& enqueue, cudaStream_t stream);
  // Drops every graph (after the buffers they point into moved).
  void clear();

 private:
  std::map<DecodeGraphKey, cudaGraphExec_t> graphs_;
};

}  // namespace qinfer::cuda
