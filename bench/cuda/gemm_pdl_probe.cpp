// Whether cuBLASLt's decode GEMMs wait for their producer when launched programmatically (docs/CUDA_DESIGN.md,
// "Decode graphs and launch edges"). A long producer of ours (the tensor-core GEMV over k = 65 536, which lets
// its dependents launch at its start) writes x; the GEMM reads it. The pair is captured as a graph twice: once with
// the plain edge cuBLASLt's launch gets, once with that edge made programmatic. x is poisoned (NaN) before every
// replay, so a GEMM that reads x before its producer has finished gives other bits than the plain graph.
//
// Usage: cuda_gemm_pdl_probe. Prints, per shape and row count, the GEMM's kernels and whether the two graphs agree;
// exits 1 when any case differs. With cuBLASLt 13 on an H200 (2026-12-01) every decode GEMM differs, so cuBLASLt's
// nvjet kernels do not wait for a programmatic producer.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/graph_cache.h"
#include "backend/cuda/kernels/gemv_mma.h"
#include "fill_random.h"

namespace qinfer::cuda::bench {
namespace {

constexpr int kProducerK = 65536;  // ≈ 0.3 ms of weights for the widest x: long enough to expose an early read
constexpr int kProducerRows = 16;  // the tensor-core GEMV's limit; GEMMs of more rows read the rest unpoisoned

struct Case {
  const char* name;
  int n, k;  // the GEMM's weight [n, k]; the producer writes x [rows, k]
};

class Probe {
 public:
  Probe() {
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    fill_random_bf16(producer_x_.as<__nv_bfloat16>(), kProducerRows * size_t{kProducerK}, 1, 1.0f, stream_);
    fill_random_bf16(producer_weight_.as<__nv_bfloat16>(), kMaxK * size_t{kProducerK}, 2, 0.01f, stream_);
    fill_random_bf16(weight_.as<__nv_bfloat16>(), kMaxN * size_t{kMaxK}, 3, 0.05f, stream_);
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  ~Probe() { cudaStreamDestroy(stream_); }
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;

  // True when the plain and the programmatic graph give the same bits.
  bool run(const Case& c, int rows) {
    auto* x = x_.as<__nv_bfloat16>();
    fill_random_bf16(x, size_t(rows) * c.k, 4, 1.0f, stream_);  // rows the producer does not write stay valid
    gemm_.tune(x, weight_.as<__nv_bfloat16>(), y_.data(), false, CublasLtGemm::bucket_of(rows), c.n, c.k, stream_);
    const auto* producer_x = producer_x_.as<__nv_bfloat16>();
    const auto* producer_weight = producer_weight_.as<__nv_bfloat16>();
    const auto enqueue = [&] {
      const GemvParams producer{producer_x, producer_weight, x, false, std::min(rows, kProducerRows), c.k, kProducerK};
      launch_gemv_mma(producer, gemv_mma_default_shape(c.k), {stream_, device_});
      gemm_.matmul(x, weight_.as<__nv_bfloat16>(), y_.data(), false, rows, c.n, c.k, stream_);
    };
    std::string kernels;
    const std::vector<uint16_t> plain = replay(enqueue, rows, c, false, kernels);
    const std::vector<uint16_t> early = replay(enqueue, rows, c, true, kernels);
    size_t differ = 0;
    for (size_t i = 0; i < plain.size(); ++i) differ += plain[i] != early[i];
    std::printf("%-8s %3d rows: %s -> %s\n", c.name, rows, kernels.c_str(),
                differ == 0 ? "same bits: the GEMM waited"
                            : (std::to_string(differ) + " of " + std::to_string(plain.size()) +
                               " outputs differ: the GEMM did not wait")
                                  .c_str());
    return differ == 0;
  }

 private:
  static constexpr int kMaxN = 2 * 9728, kMaxK = 9728, kMaxRows = 64;

  // Captures `enqueue`, makes the producer's edges into kernels programmatic when asked, replays three times with x's
  // produced rows poisoned before each, and returns the last output's bits.
  std::vector<uint16_t> replay(const std::function<void()>& enqueue, int rows, const Case& c, bool programmatic,
                               std::string& kernels) {
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    enqueue();
    CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    size_t roots = 1;
    cudaGraphNode_t producer = nullptr;
    CUDA_CHECK(cudaGraphGetRootNodes(graph, &producer, &roots));
    const GraphEdges edges = graph_edges(graph);
    kernels.clear();
    for (size_t i = 0; i < edges.data.size(); ++i) {
      const std::string name = kernel_node_name(edges.to[i]);
      if (name.empty()) continue;
      kernels += (kernels.empty() ? "" : ", ") + name;
      if (!programmatic || edges.from[i] != producer) continue;
      cudaGraphEdgeData early{};
      early.type = cudaGraphDependencyTypeProgrammatic;
      early.from_port = cudaGraphKernelNodePortProgrammatic;
      replace_edge(graph, edges, i, early);
    }
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const size_t produced = size_t(std::min(rows, kProducerRows)) * c.k * sizeof(__nv_bfloat16);
    for (int i = 0; i < 3; ++i) {
      CUDA_CHECK(cudaMemsetAsync(x_.data(), 0xFF, produced, stream_));
      CUDA_CHECK(cudaGraphLaunch(exec, stream_));
    }
    std::vector<uint16_t> out(size_t(rows) * c.n);
    CUDA_CHECK(cudaMemcpyAsync(out.data(), y_.data(), out.size() * sizeof(uint16_t), cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    return out;
  }

  DeviceCapabilities device_ = query_device_capabilities();
  cudaStream_t stream_ = nullptr;
  DeviceBuffer producer_x_{kProducerRows * size_t{kProducerK} * 2, "probe producer x"};
  DeviceBuffer producer_weight_{size_t{kMaxK} * kProducerK * 2, "probe producer weight"};
  DeviceBuffer x_{size_t{kMaxRows} * kMaxK * 2, "probe x"};
  DeviceBuffer weight_{size_t{kMaxN} * kMaxK * 2, "probe weight"};
  DeviceBuffer y_{size_t{kMaxRows} * kMaxN * 2, "probe y"};
  CublasLtGemm gemm_;
};

}  // namespace
}  // namespace qinfer::cuda::bench

int main() {
  using qinfer::cuda::bench::Case;
  const Case cases[] = {{"qkv", 6144, 2560}, {"o_proj", 2560, 4096}, {"gate_up", 2 * 9728, 2560}, {"down", 2560, 9728}};
  qinfer::cuda::bench::Probe probe;
  bool all_waited = true;
  for (const Case& c : cases)
    for (int rows : {4, 8, 16, 64}) all_waited = probe.run(c, rows) && all_waited;
  return all_waited ? 0 : 1;
}
