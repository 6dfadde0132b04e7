// The one-shot all-reduce fused with the residual add and RMSNorm against the unfused path (the rank-order sum of the
// partials, then fused_add_rmsnorm of the fp32 sum), bit for bit, with N ranks on one GPU calling it from their own
// threads and streams over calls of varying rows (the flags and the two partial buffers reused).
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "backend/cuda/kernels/fused_add_rmsnorm.h"
#include "backend/cuda/kernels/fused_allreduce_add_rmsnorm.h"
#include "backend/cuda/kernels/rank_order_sum.h"
#include "backend/cuda/tensor_parallel_rank.h"
#include "gpu_test_util.h"

namespace qinfer::cuda {
namespace {

using testing::DeviceArray;

uint16_t bf16_bits(__nv_bfloat16 x) { return static_cast<__nv_bfloat16_raw>(x).x; }

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-2, 2);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

void expect_fused_equals_unfused(int num_ranks, int hidden) {
  const std::vector<int> rows_per_call = {1, 3, 8, 2, 8, 5, 1};
  const size_t max_elements = static_cast<size_t>(kOneShotAllReduceMaxRows) * hidden;
  std::mt19937 rng(static_cast<unsigned>(num_ranks * 1000 + hidden));
  const std::vector<float> residual0 = random_floats(max_elements, rng);
  const DeviceArray<__nv_bfloat16> weight(testing::random_bf16(static_cast<size_t>(hidden), rng, 0.5f, 1.0f));
  // partials[call][rank]: [rows, hidden]
  std::vector<std::vector<std::vector<float>>> partials(rows_per_call.size());
  for (size_t call = 0; call < rows_per_call.size(); ++call)
    for (int r = 0; r < num_ranks; ++r)
      partials[call].push_back(random_floats(static_cast<size_t>(rows_per_call[call]) * hidden, rng));

  // The unfused path on one stream.
  DeviceArray<float> residual_ref(residual0), sum(max_elements);
  DeviceArray<__nv_bfloat16> out_ref(max_elements);
  std::vector<DeviceArray<float>> inputs;
  for (int r = 0; r < num_ranks; ++r) inputs.emplace_back(max_elements);
  for (size_t call = 0; call < rows_per_call.size(); ++call) {
    const int rows = rows_per_call[call];
    RankOrderSumParams reduce;
    for (int r = 0; r < num_ranks; ++r) {
      CUDA_CHECK(cudaMemcpy(inputs[static_cast<size_t>(r)].get(), partials[call][static_cast<size_t>(r)].data(),
                            partials[call][static_cast<size_t>(r)].size() * 4, cudaMemcpyHostToDevice));
      reduce.inputs[r] = inputs[static_cast<size_t>(r)].get();
    }
    reduce.num_inputs = num_ranks;
    reduce.out = sum.get();
    reduce.count = static_cast<size_t>(rows) * hidden;
    launch_rank_order_sum(reduce, nullptr);
    FusedAddRmsNormParams norm;
    norm.residual = residual_ref.get();
    norm.delta_f32 = sum.get();
    norm.weight = weight.get();
    norm.out = out_ref.get();
    norm.num_rows = rows;
    norm.hidden = hidden;
    launch_fused_add_rmsnorm(norm, test_stream());
  }
  const std::vector<float> expected_residual = residual_ref.download();
  const std::vector<__nv_bfloat16> expected_out = out_ref.download();

  // The fused path: every rank from its thread, its residual replicated.
  const OneShotPeerBuffers buffers(std::vector<int>(static_cast<size_t>(num_ranks), test_device().device), hidden);
  const OneShotPeers& peers = buffers.peers();
  std::vector<std::vector<float>> residuals(static_cast<size_t>(num_ranks));
  std::vector<std::vector<__nv_bfloat16>> outs(static_cast<size_t>(num_ranks));
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < num_ranks; ++r)
      threads.emplace_back([&, r] {
        CUDA_CHECK(cudaSetDevice(test_device().device));
        cudaStream_t stream = nullptr;
        CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        DeviceArray<float> residual(residual0);
        DeviceArray<__nv_bfloat16> out(max_elements);
        for (size_t call = 0; call < rows_per_call.size(); ++call) {
          const int buffer = static_cast<int>(call % OneShotPeers::kBuffers);
          const std::vector<float>& mine = partials[call][static_cast<size_t>(r)];
          CUDA_CHECK(
              cudaMemcpyAsync(peers.partials[buffer][r], mine.data(), mine.size() * 4, cudaMemcpyHostToDevice, stream));
          FusedAllReduceAddRmsNormParams p;
          for (int q = 0; q < num_ranks; ++q) {
            p.partials[q] = peers.partials[buffer][q];
            p.arrivals[q] = peers.arrivals[q];
          }
          p.calls = peers.calls[r];
          p.rank = r;
          p.num_ranks = num_ranks;
          p.residual = residual.get();
          p.weight = weight.get();
          p.out = out.get();
          p.num_rows = rows_per_call[call];
          p.hidden = hidden;
          launch_fused_allreduce_add_rmsnorm(p, test_stream(stream));
        }
        CUDA_CHECK(cudaStreamSynchronize(stream));
        residuals[static_cast<size_t>(r)] = residual.download();
        outs[static_cast<size_t>(r)] = out.download();
        CUDA_CHECK(cudaStreamDestroy(stream));
      });
  }
  const size_t last_elements = static_cast<size_t>(rows_per_call.back()) * hidden;
  for (int r = 0; r < num_ranks; ++r) {
    int residual_mismatches = 0, out_mismatches = 0;
    for (size_t i = 0; i < max_elements; ++i)
      residual_mismatches += residuals[static_cast<size_t>(r)][i] != expected_residual[i];
    for (size_t i = 0; i < last_elements; ++i)
      out_mismatches += bf16_bits(outs[static_cast<size_t>(r)][i]) != bf16_bits(expected_out[i]);
    EXPECT_EQ(residual_mismatches, 0) << "rank " << r << " of " << num_ranks << ", hidden " << hidden;
    EXPECT_EQ(out_mismatches, 0) << "rank " << r << " of " << num_ranks << ", hidden " << hidden;
  }
}

TEST(FusedAllReduceAddRmsNorm, TwoRanksEqualTheUnfusedPath) {
  SKIP_WITHOUT_GPU();
  expect_fused_equals_unfused(2, 4096);
}

TEST(FusedAllReduceAddRmsNorm, ThreeRanksOfAnOddWidthEqualTheUnfusedPath) {
  SKIP_WITHOUT_GPU();
  expect_fused_equals_unfused(3, 2560 + 8);
}

TEST(FusedAllReduceAddRmsNorm, EightRanksEqualTheUnfusedPath) {
  SKIP_WITHOUT_GPU();
  expect_fused_equals_unfused(8, 1024);
}

}  // namespace
}  // namespace qinfer::cuda
