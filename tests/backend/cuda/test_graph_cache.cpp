// start_dependents_at_launch_completion over a captured chain of programmatically launched kernels: every
// programmatic edge (or, filtered by the successor's name, exactly those into the named kernels; and none out of a
// kernel named to be kept) leaves its predecessor's launch-completion port afterwards, no other edge changes, and
// replays of the rewritten graph give the bits of the same chain launched on the stream (each GEMV reads its
// predecessor's output, so a successor that ran ahead of its producer would read poisoned values).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cuda/graph_cache.h"
#include "backend/cuda/kernels/gemv.h"
#include "backend/cuda/kernels/gemv_mma.h"
#include "gpu_test_util.h"

namespace qinfer::cuda {
namespace {

using namespace testing;  // DeviceArray, random inputs

// Nodes whose kernel name contains `part`; no filter when it is empty.
GraphNodeFilter named(std::string_view part) {
  if (part.empty()) return {};
  return [part](cudaGraphNode_t node) { return kernel_node_name(node).find(part) != std::string::npos; };
}

// A chain of 6 one-row linears, odd ones on the tensor-core GEMV (kernel names "...gemv_kernel..." and
// "...gemv_mma_kernel..."), captured and rewritten into the kernels named `successor_name_part` and not out of those
// named `predecessor_kept`; `expected_rewritten` edges must change.
void check_rewritten_chain(std::string_view successor_name_part, size_t expected_rewritten,
                           std::string_view predecessor_kept = {}) {
  constexpr int kWidth = 2048, kLinears = 6;
  std::mt19937 rng(7);
  // [kWidth, kWidth] each; small weights keep the chained activations in bf16's range.
  std::vector<DeviceArray<__nv_bfloat16>> weights;
  for (int i = 0; i < kLinears; ++i) weights.emplace_back(random_bf16(size_t{kWidth} * kWidth, rng, 0.03f));
  const DeviceArray<__nv_bfloat16> x(random_bf16(kWidth, rng));
  std::vector<DeviceArray<__nv_bfloat16>> outputs;  // [1, kWidth] each, poisoned
  for (int i = 0; i < kLinears; ++i) outputs.emplace_back(size_t{kWidth});
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto enqueue_chain = [&] {
    for (int i = 0; i < kLinears; ++i) {
      const GemvParams params{
          i == 0 ? x.get() : outputs[i - 1].get(), weights[i].get(), outputs[i].get(), false, 1, kWidth, kWidth};
      if (i % 2 == 1)
        launch_gemv_mma(params, gemv_mma_default_shape(kWidth), test_stream(stream));
      else
        launch_gemv(params, test_stream(stream));
    }
  };
  const auto poison = [&] {
    for (auto& y : outputs) CUDA_CHECK(cudaMemsetAsync(y.get(), 0xFF, kWidth * sizeof(__nv_bfloat16), stream));
  };
  enqueue_chain();
  const std::vector<__nv_bfloat16> expected = outputs.back().download();
  for (const auto& value : expected) ASSERT_TRUE(std::isfinite(to_float(value)));

  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  enqueue_chain();
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  const GraphEdges before = graph_edges(graph);
  size_t programmatic = 0;
  for (const auto& data : before.data) programmatic += data.type == cudaGraphDependencyTypeProgrammatic;
  ASSERT_EQ(programmatic, size_t{kLinears - 1}) << "every GEMV after the first is launched programmatically";

  EXPECT_EQ(start_dependents_at_launch_completion(graph, named(successor_name_part), named(predecessor_kept)),
            expected_rewritten);
  const GraphEdges after = graph_edges(graph);
  ASSERT_EQ(after.data.size(), before.data.size());
  for (size_t i = 0; i < before.data.size(); ++i) {
    // Same endpoints (in any order); the selected programmatic edges now leave the launch-completion port, the others
    // are unchanged.
    size_t j = 0;
    while (j < after.data.size() && !(after.from[j] == before.from[i] && after.to[j] == before.to[i])) ++j;
    ASSERT_LT(j, after.data.size()) << "edge " << i << " lost";
    const std::string successor = kernel_node_name(before.to[i]);
    const bool kept =
        !predecessor_kept.empty() && kernel_node_name(before.from[i]).find(predecessor_kept) != std::string::npos;
    const bool selected = before.data[i].type == cudaGraphDependencyTypeProgrammatic &&
                          successor.find(successor_name_part) != std::string::npos && !kept;
    EXPECT_EQ(after.data[j].type, before.data[i].type);
    EXPECT_EQ(after.data[j].to_port, before.data[i].to_port);
    EXPECT_EQ(after.data[j].from_port, selected ? cudaGraphKernelNodePortLaunchCompletion : before.data[i].from_port)
        << "edge into " << successor;
  }

  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 5; ++replay) {
    poison();
    CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<__nv_bfloat16> got = outputs.back().download();
    for (int i = 0; i < kWidth; ++i)
      ASSERT_EQ(static_cast<__nv_bfloat16_raw>(got[i]).x, static_cast<__nv_bfloat16_raw>(expected[i]).x)
          << "replay " << replay << ", output " << i;
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(DecodeGraphEdges, RolesMarkTheKernelJustCaptured) {
  SKIP_WITHOUT_GPU();
  constexpr int kWidth = 256;
  std::mt19937 rng(3);
  const DeviceArray<__nv_bfloat16> weight(random_bf16(size_t{kWidth} * kWidth, rng)), x(random_bf16(kWidth, rng));
  const DeviceArray<__nv_bfloat16> y(size_t{kWidth});
  const GemvParams params{x.get(), weight.get(), y.get(), false, 1, kWidth, kWidth};
  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  GraphNodeRoles roles;
  roles.mark_last_launch(stream, GraphNodeRole::kDecodeAttention);  // not capturing: nothing to mark
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  launch_gemv(params, test_stream(stream));
  launch_gemv_mma(params, gemv_mma_default_shape(kWidth), test_stream(stream));
  roles.mark_last_launch(stream, GraphNodeRole::kRegisterDecodeAttention);
  launch_gemv(params, test_stream(stream));
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  size_t count = 0;
  CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  int marked = 0;
  for (cudaGraphNode_t node : nodes) {
    const bool is_mma = kernel_node_name(node).find("gemv_mma_kernel") != std::string::npos;
    EXPECT_EQ(roles.has(node, GraphNodeRole::kRegisterDecodeAttention), is_mma);
    EXPECT_EQ(roles.has(node, GraphNodeRole::kDecodeAttention), is_mma)
        << "a register kernel is a decode attention one";
    marked += is_mma;
  }
  EXPECT_EQ(marked, 1);
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(DecodeGraphEdges, LaunchCompletionKeepsEveryDependency) {
  SKIP_WITHOUT_GPU();
  if (!test_device().programmatic_launch)
    GTEST_SKIP() << "programmatic dependent launch needs a compute 9.0 device running an image built with it";
  check_rewritten_chain({}, 5);
}

TEST(DecodeGraphEdges, LaunchCompletionOnlyIntoNamedKernels) {
  SKIP_WITHOUT_GPU();
  if (!test_device().programmatic_launch)
    GTEST_SKIP() << "programmatic dependent launch needs a compute 9.0 device running an image built with it";
  check_rewritten_chain("gemv_mma_kernel", 3);  // the edges into linears 1, 3 and 5
  check_rewritten_chain("gemv_kernel", 2);      // into linears 2 and 4 (the first has no predecessor)
  check_rewritten_chain("no such kernel", 0);
}

TEST(DecodeGraphEdges, LaunchCompletionNotOutOfKeptKernels) {
  SKIP_WITHOUT_GPU();
  if (!test_device().programmatic_launch)
    GTEST_SKIP() << "programmatic dependent launch needs a compute 9.0 device running an image built with it";
  check_rewritten_chain({}, 2, "gemv_kernel");                 // only the edges out of linears 1 and 3
  check_rewritten_chain({}, 3, "gemv_mma_kernel");             // out of linears 0, 2 and 4
  check_rewritten_chain("gemv_mma_kernel", 0, "gemv_kernel");  // every edge into a tensor-core GEMV leaves a kept one
}

}  // namespace
}  // namespace qinfer::cuda
