// The fp8 KV cache's dequantising gather against the host codec (util/fp8.h, util/half.h): every output value must be
// bit-equal to bf16(fp8_e4m3_to_float(byte) * scale), and every slot past a block's valid tokens must be zero. The
// scratch is poisoned beforehand, including one block past the gathered ones that must stay untouched.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "backend/cuda/kernels/kv_dequant_gather.h"
#include "gpu_test_util.h"
#include "util/fp8.h"
#include "util/half.h"

namespace qinfer::cuda {
namespace {

using testing::DeviceArray;

struct GatherShape {
  int head_dim, block_size;
};

class KvDequantGather : public ::testing::TestWithParam<GatherShape> {};

std::vector<uint8_t> random_fp8_bytes(size_t n, std::mt19937& rng) {
  std::vector<uint8_t> bytes(n);
  for (auto& b : bytes) {
    do {
      b = static_cast<uint8_t>(rng());
    } while ((b & 0x7f) == kFp8E4m3NanBits);
  }
  return bytes;
}

// Scales over several binades, as amax / 448 of real K and V vectors spread.
std::vector<float> random_scales(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-14, 2);
  std::vector<float> scales(n);
  for (auto& s : scales) s = std::ldexp(mantissa(rng), exponent(rng));
  return scales;
}

TEST_P(KvDequantGather, MatchesTheHostCodecBitForBit) {
  SKIP_WITHOUT_GPU();
  const auto [head_dim, block_size] = GetParam();
  constexpr int kKvHeads = 4, kPoolBlocks = 13;
  std::mt19937 rng(static_cast<unsigned>(head_dim * 100 + block_size));
  const size_t block_elements = static_cast<size_t>(kKvHeads) * block_size * head_dim;
  const size_t block_scales = static_cast<size_t>(kKvHeads) * block_size;
  const std::vector<uint8_t> k_cache = random_fp8_bytes(kPoolBlocks * block_elements, rng),
                             v_cache = random_fp8_bytes(kPoolBlocks * block_elements, rng);
  const std::vector<float> k_scales = random_scales(kPoolBlocks * block_scales, rng),
                           v_scales = random_scales(kPoolBlocks * block_scales, rng);
  // Scattered blocks, partial fills (the last block of a context and a single token), one block listed twice.
  const std::vector<int32_t> src_blocks = {5, 0, 12, 3, 7, 5, 9};
  const std::vector<int32_t> valid_tokens = {block_size, block_size, 3, block_size, block_size - 1, 1, block_size};
  const int num_blocks = static_cast<int>(src_blocks.size());

  DeviceArray<uint8_t> d_k(k_cache), d_v(v_cache);
  DeviceArray<float> d_k_scales(k_scales), d_v_scales(v_scales);
  DeviceArray<int32_t> d_src(src_blocks), d_valid(valid_tokens);
  DeviceArray<__nv_bfloat16> k_out((num_blocks + 1) * block_elements), v_out((num_blocks + 1) * block_elements);
  KvDequantGatherParams params;
  params.k_cache = d_k.get();
  params.v_cache = d_v.get();
  params.k_scales = d_k_scales.get();
  params.v_scales = d_v_scales.get();
  params.src_blocks = d_src.get();
  params.valid_tokens = d_valid.get();
  params.k_out = k_out.get();
  params.v_out = v_out.get();
  params.num_blocks = num_blocks;
  params.num_kv_heads = kKvHeads;
  params.block_size = block_size;
  params.head_dim = head_dim;
  launch_kv_dequant_gather(params, test_stream());
  CUDA_CHECK(cudaGetLastError());

  const auto check = [&](const char* name, const std::vector<__nv_bfloat16>& out, const std::vector<uint8_t>& cache,
                         const std::vector<float>& scales) {
    int mismatches = 0;
    for (int b = 0; b <= num_blocks; ++b) {
      for (int head = 0; head < kKvHeads; ++head) {
        for (int token = 0; token < block_size; ++token) {
          for (int d = 0; d < head_dim; ++d) {
            const size_t within = (static_cast<size_t>(head) * block_size + token) * head_dim + d;
            uint16_t expected = 0xffff;  // the poison: the block past the gathered ones is never written
            if (b < num_blocks && token < valid_tokens[b]) {
              const size_t src = static_cast<size_t>(src_blocks[b]);
              const float scale = scales[src * block_scales + static_cast<size_t>(head) * block_size + token];
              expected = float_to_bf16(fp8_e4m3_to_float(cache[src * block_elements + within]) * scale);
            } else if (b < num_blocks) {
              expected = 0;
            }
            const uint16_t actual = static_cast<__nv_bfloat16_raw>(out[b * block_elements + within]).x;
            if (actual != expected && ++mismatches <= 5) {
              ADD_FAILURE() << name << " scratch block " << b << " head " << head << " token " << token << " dim " << d
                            << ": got 0x" << std::hex << actual << ", expected 0x" << expected;
            }
          }
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << name;
  };
  check("K", k_out.download(), k_cache, k_scales);
  check("V", v_out.download(), v_cache, v_scales);
}

INSTANTIATE_TEST_SUITE_P(Shapes, KvDequantGather,
                         ::testing::Values(GatherShape{64, 16}, GatherShape{64, 32}, GatherShape{128, 16},
                                           GatherShape{128, 32}),
                         [](const auto& info) {
                           return "head_dim" + std::to_string(info.param.head_dim) + "_block" +
                                  std::to_string(info.param.block_size);
                         });

TEST(KvDequantGatherLaunch, NoBlocksIsANoOp) {
  SKIP_WITHOUT_GPU();
  KvDequantGatherParams params;
  params.num_kv_heads = 8;
  params.block_size = 16;
  params.head_dim = 128;
  launch_kv_dequant_gather(params, test_stream());
  CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace qinfer::cuda
