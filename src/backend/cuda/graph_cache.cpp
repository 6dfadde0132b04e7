#include "backend/cuda/graph_cache.h"

#include "backend/cuda/cuda_check.h"

namespace qinfer::cuda {

namespace {

// Bounds memory spent on graphs when contexts and batch sizes wander; recapturing costs a few milliseconds.
constexpr size_t kMaxGraphs = 64;

}  // namespace

void DecodeGraphCache::launch(const DecodeGraphKey& key, const std::function<void()>& enqueue, cudaStream_t stream) {
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    if (graphs_.size() >= kMaxGraphs) clear();
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    enqueue();
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
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
