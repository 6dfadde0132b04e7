#include "backend/cuda/graph_cache.h"

#include <cuda.h>

#include "backend/cuda/cuda_check.h"

namespace qinfer::cuda {

namespace {

// Bounds memory spent on graphs when contexts and batch sizes wander; recapturing costs a few milliseconds.
constexpr size_t kMaxGraphs = 64;

}  // namespace

GraphEdges graph_edges(cudaGraph_t graph) {
  size_t count = 0;
  CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &count));
  GraphEdges edges{std::vector<cudaGraphNode_t>(count), std::vector<cudaGraphNode_t>(count),
                   std::vector<cudaGraphEdgeData>(count)};
  CUDA_CHECK(cudaGraphGetEdges(graph, edges.from.data(), edges.to.data(), edges.data.data(), &count));
  return edges;
}

void replace_edge(cudaGraph_t graph, const GraphEdges& edges, size_t i, const cudaGraphEdgeData& data) {
  CUDA_CHECK(cudaGraphRemoveDependencies(graph, &edges.from[i], &edges.to[i], &edges.data[i], 1));
  CUDA_CHECK(cudaGraphAddDependencies(graph, &edges.from[i], &edges.to[i], &data, 1));
}

std::string kernel_node_name(cudaGraphNode_t node) {
  cudaGraphNodeType type{};
  CUDA_CHECK(cudaGraphNodeGetType(node, &type));
  if (type != cudaGraphNodeTypeKernel) return "";
  // Through the driver's entry points, looked up once: the runtime cannot name kernels launched through the driver
  // (cuBLASLt's), and qinfer links no libcuda.
  using GetParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
  using FuncName = CUresult (*)(const char**, CUfunction);
  struct DriverNaming {
    GetParams get_params = nullptr;
    FuncName func_name = nullptr;
  };
  static const DriverNaming driver = [] {
    void* get_params = nullptr;
    void* func_name = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuGraphKernelNodeGetParams", &get_params, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        cudaGetDriverEntryPointByVersion("cuFuncGetName", &func_name, 12030, cudaEnableDefault, &found) != cudaSuccess)
      return DriverNaming{};
    return DriverNaming{reinterpret_cast<GetParams>(get_params), reinterpret_cast<FuncName>(func_name)};
  }();
  if (driver.get_params == nullptr || driver.func_name == nullptr) return "";
  CUDA_KERNEL_NODE_PARAMS params{};
  const char* name = nullptr;
  if (driver.get_params(node, &params) != CUDA_SUCCESS || params.func == nullptr ||
      driver.func_name(&name, params.func) != CUDA_SUCCESS || name == nullptr)
    return "";
  return name;
}

void GraphNodeRoles::mark_last_launch(cudaStream_t stream, GraphNodeRole role) {
  cudaStreamCaptureStatus status{};
  const cudaGraphNode_t* last = nullptr;
  size_t count = 0;
  CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &last, nullptr, &count));
  if (status != cudaStreamCaptureStatusActive) return;
  QINFER_CHECK(count == 1, "the node just captured is the stream's only capture dependency");
  roles_[last[0]] = role;
}

bool GraphNodeRoles::has(cudaGraphNode_t node, GraphNodeRole role) const {
  const auto it = roles_.find(node);
  if (it == roles_.end()) return false;
  return it->second == role ||
         (role == GraphNodeRole::kDecodeAttention && it->second == GraphNodeRole::kRegisterDecodeAttention);
}

size_t start_dependents_at_launch_completion(cudaGraph_t graph, const GraphNodeFilter& rewrite_into,
                                             const GraphNodeFilter& keep_out_of) {
  const GraphEdges edges = graph_edges(graph);
  size_t rewritten = 0;
  for (size_t i = 0; i < edges.data.size(); ++i) {
    const cudaGraphEdgeData& data = edges.data[i];
    if (data.type != cudaGraphDependencyTypeProgrammatic || data.from_port != cudaGraphKernelNodePortProgrammatic)
      continue;
    if (rewrite_into && !rewrite_into(edges.to[i])) continue;
    if (keep_out_of && keep_out_of(edges.from[i])) continue;
    cudaGraphEdgeData at_launch = data;
    at_launch.from_port = cudaGraphKernelNodePortLaunchCompletion;
    replace_edge(graph, edges, i, at_launch);
    ++rewritten;
  }
  return rewritten;
}

void DecodeGraphCache::launch(const DecodeGraphKey& key, const std::function<void(GraphNodeRoles&)>& enqueue,
                              cudaStream_t stream) {
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    if (graphs_.size() >= kMaxGraphs) clear();
    cudaGraph_t graph = nullptr;
    GraphNodeRoles roles;
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    enqueue(roles);
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    const auto into_decode_attention = [&](cudaGraphNode_t node) {
      return roles.has(node, GraphNodeRole::kDecodeAttention);
    };
    const auto out_of_register_attention = [&](cudaGraphNode_t node) {
      return roles.has(node, GraphNodeRole::kRegisterDecodeAttention);
    };
    start_dependents_at_launch_completion(graph,
                                          key.padded_sequences <= kLaunchCompletionMaxSequences
                                              ? GraphNodeFilter{}
                                              : GraphNodeFilter(into_decode_attention),
                                          out_of_register_attention);
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
