// The quantized GEMM's launch shapes, decided on the host: k splits of tiles_per_block 128-k tiles (the last split
// takes what is left), which shapes have kernels, and the workspace the splits need.
#include <gtest/gtest.h>

#include "backend/cuda/kernels/quantized_gemm.h"

namespace qinfer::cuda {
namespace {

TEST(QuantizedGemmShape, SplitsKIntoBlocksOfTiles) {
  EXPECT_EQ(quantized_gemm_splits({4, 4}, 2560), 5);  // 20 tiles
  EXPECT_EQ(quantized_gemm_splits({4, 8}, 2560), 3);
  EXPECT_EQ(quantized_gemm_splits({8, 2}, 9728), 38);  // 76 tiles
  EXPECT_EQ(quantized_gemm_splits({4, 4}, 2080), 5);   // 17 tiles, the last partial
  EXPECT_EQ(quantized_gemm_splits({4, 4}, 96), 1);
  EXPECT_TRUE(quantized_gemm_supports(quantized_gemm_default_shape()));
  EXPECT_FALSE(quantized_gemm_supports({6, 4}));
  EXPECT_FALSE(quantized_gemm_supports({4, 3}));
  EXPECT_FALSE(quantized_gemm_supports({4, 0}));
}

TEST(QuantizedGemmShape, WorkspaceHoldsEverySplitsPartialSums) {
  EXPECT_EQ(quantized_gemm_workspace_floats({4, 4}, 2560, 4096, 64), size_t{8} * 64 * 2560);
  EXPECT_EQ(quantized_gemm_workspace_floats({4, 8}, 64, 1024, 17), size_t{0});
}

}  // namespace
}  // namespace qinfer::cuda
