#include "backend/cuda/graph_cache.h"

#include <vector>

#include "backend/cuda/cuda_check.h"

namespace qinfer::cuda {

namespace {

// Bounds memory spent on graphs when contexts and batch sizes wander; recapturing costs a few milliseconds.
constexpr size_t kMaxGraphs = 64;

}  // namespace

size_t start_dependents_at_launch_completion(cudaGraph_t graph) {
  size_t count = 0;
  CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count));
  std::vector<cudaGraphNode_t> from(count), to(count);
  std::vector<cudaGraphEdgeData> data(count);
  CUDA_CHECK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &count));
  size_t rewritten = 0;
  for (size_t i = 0; i < count; ++i) {
    if (data[i].type != cudaGraphDependencyTypeProgrammatic || data[i].from_port != cudaGraphKernelNodePortProgrammatic)
      continue;
    cudaGraphEdgeData at_launch = data[i];
    at_launch.from_port = cudaGraphKernelNodePortLaunchCompletion;
    CUDA_CHECK(cudaGraphRemoveDependencies(graph, &from[i], &to[i], &data[i], 1));
    CUDA_CHECK(cudaGraphAddDependencies(graph, &from[i], &to[i], &at_launch, 1));
    ++rewritten;
  }
  return rewritten;
}

void DecodeGraphCache::launch(const DecodeGraphKey& key, const std::function<void()>& enqueue, cudaStream_t stream) {
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    if (graphs_.size() >= kMaxGraphs) clear();
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    enqueue();
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    if (key.padded_sequences <= kLaunchCompletionMaxSequences) start_dependents_at_launch_completion(graph);
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphDestroy(graph));
    it = graphs_.emplace(key, exec).first;
  }
  CUDA_CHECK(cudaGraphLaunch(it->second, stream));
}

void DecodeGraphCache::clear() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
}

}  // namespace qinfer::cuda
