// The host repacking of quantized linears for the CUDA kernels (GPU-free): every element of the packed weight
// decodes to exactly the value the format defines (dequantize_linear_rows), for AWQ, GPTQ and FP8 checkpoints of the
// tiny test models, fused parts included; and what the kernels cannot run is refused by name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/cuda/quantized_weight_layout.h"
#include "model/quantization_config.h"
#include "model/test_model.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace qinfer::cuda {
namespace {

LoadedModel quantized_model(const std::string& preset, QuantizationConfig quantization) {
  ModelConfig config = test_model_preset(preset);
  config.quantization = std::move(quantization);
  return make_dummy_model(config, 11, nullptr);
}

// Every element of `packed` equals the stacked parts' own dequantization.
void expect_packed_equals_parts(const PackedQuantizedLinear& packed, const std::vector<const LinearWeight*>& parts) {
  int row = 0;
  for (const LinearWeight* part : parts) {
    std::vector<float> expected(static_cast<size_t>(part->in_features));
    for (int64_t r = 0; r < part->out_features; ++r, ++row) {
      dequantize_linear_rows(*part, r, 1, expected.data());
      for (int col = 0; col < packed.k; ++col)
        ASSERT_EQ(packed_weight_value(packed, row, col), expected[static_cast<size_t>(col)])
            << "row " << row << " col " << col;
    }
  }
  EXPECT_EQ(row, packed.n);
}

struct LayoutCase {
  const char* preset;
  QuantizationConfig quantization;
  QuantizedFormat format;
};

class QuantizedLayoutTest : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(QuantizedLayoutTest, PackedElementsEqualTheFormatsDequantization) {
  const LayoutCase& c = GetParam();
  const LoadedModel model = quantized_model(c.preset, c.quantization);
  ThreadPool pool(2);
  const Qwen3LayerWeights& layer = model.weights.layers.front();
  const std::vector<std::vector<const LinearWeight*>> linears = {{&layer.q_proj, &layer.k_proj, &layer.v_proj},
                                                                 {&layer.o_proj},
                                                                 {&layer.gate_proj, &layer.up_proj},
                                                                 {&layer.down_proj}};
  for (const auto& parts : linears) {
    const PackedQuantizedLinear packed = pack_quantized_linear(parts, pool);
    EXPECT_EQ(packed.format, c.format);
    EXPECT_EQ(packed.weight.size(), static_cast<size_t>(packed.n) * packed.row_words());
    expect_packed_equals_parts(packed, parts);
  }
}

// tiny: k = 256, 768 (whole tiles); tiny-untied: k = 192, 384, 512 (a half tile at the end of 192).
INSTANTIATE_TEST_SUITE_P(Formats, QuantizedLayoutTest,
                         ::testing::Values(LayoutCase{"tiny", awq_quantization(128), QuantizedFormat::kInt4},
                                           LayoutCase{"tiny-untied", awq_quantization(64), QuantizedFormat::kInt4},
                                           LayoutCase{"tiny-untied", awq_quantization(32), QuantizedFormat::kInt4},
                                           LayoutCase{"tiny", gptq_quantization(128), QuantizedFormat::kInt4},
                                           LayoutCase{"tiny-untied", gptq_quantization(64), QuantizedFormat::kInt4},
                                           LayoutCase{"tiny", fp8_block_quantization(), QuantizedFormat::kFp8Block},
                                           LayoutCase{"tiny-untied", fp8_block_quantization(),
                                                      QuantizedFormat::kFp8Block}));

TEST(QuantizedLayout, FusedPartsOfDifferentFormatsOrGroupsAreRefusedByName) {
  const LoadedModel awq = quantized_model("tiny", awq_quantization(128));
  const LoadedModel awq64 = quantized_model("tiny", awq_quantization(64));
  const LoadedModel fp8 = quantized_model("tiny", fp8_block_quantization());
  ThreadPool pool(1);
  const auto expect_refused = [&](const std::vector<const LinearWeight*>& parts, const std::string& needle) {
    try {
      pack_quantized_linear(parts, pool);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  const Qwen3LayerWeights &a = awq.weights.layers.front(), &b = awq64.weights.layers.front(),
                          &f = fp8.weights.layers.front();
  expect_refused({&a.gate_proj, &f.up_proj}, "model.layers.0.mlp.up_proj.weight");
  expect_refused({&a.gate_proj, &b.up_proj}, "group size 64");
}

}  // namespace
}  // namespace qinfer::cuda
