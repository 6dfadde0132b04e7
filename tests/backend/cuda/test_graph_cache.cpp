// start_dependents_at_launch_completion over a captured chain of programmatically launched kernels: every
// programmatic edge leaves its predecessor's launch-completion port afterwards, no other edge changes, and replays of
// the rewritten graph give the bits of the same chain launched on the stream (each GEMV reads its predecessor's
// output, so a successor that ran ahead of its producer would read poisoned values).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cuda/graph_cache.h"
#include "backend/cuda/kernels/device_probe.h"
#include "backend/cuda/kernels/gemv.h"
#include "gpu_test_util.h"

namespace qinfer::cuda {
namespace {

using namespace testing;  // DeviceArray, random inputs

TEST(DecodeGraphEdges, LaunchCompletionKeepsEveryDependency) {
  SKIP_WITHOUT_GPU();
  if (!device_supports_pdl()) GTEST_SKIP() << "programmatic dependent launch needs compute capability 9.0";
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
    for (int i = 0; i < kLinears; ++i)
      launch_gemv(
          {i == 0 ? x.get() : outputs[i - 1].get(), weights[i].get(), outputs[i].get(), false, 1, kWidth, kWidth},
          stream);
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

  EXPECT_EQ(start_dependents_at_launch_completion(graph), programmatic);
  const GraphEdges after = graph_edges(graph);
  ASSERT_EQ(after.data.size(), before.data.size());
  for (size_t i = 0; i < before.data.size(); ++i) {
    // Same endpoints (in any order); programmatic edges now leave the launch-completion port, the others unchanged.
    size_t j = 0;
    while (j < after.data.size() && !(after.from[j] == before.from[i] && after.to[j] == before.to[i])) ++j;
    ASSERT_LT(j, after.data.size()) << "edge " << i << " lost";
    EXPECT_EQ(after.data[j].type, before.data[i].type);
    EXPECT_EQ(after.data[j].to_port, before.data[i].to_port);
    EXPECT_EQ(after.data[j].from_port, before.data[i].type == cudaGraphDependencyTypeProgrammatic
                                           ? cudaGraphKernelNodePortLaunchCompletion
                                           : before.data[i].from_port);
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

}  // namespace
}  // namespace qinfer::cuda
