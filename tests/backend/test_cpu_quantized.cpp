// The CPU reference on quantized checkpoints: its logits equal, to fp32 rounding, those of the same weights
// dequantized (by this test's own unpacking, written from the formats' definitions) and stored as an F32
// checkpoint; and quantization moves the logits of the bf16 model only as far as 4- or 8-bit weights should.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "testing/checkpoint_edit.h"
#include "backend/backend.h"
#include "backend/factory.h"
#include "testing/batch_test_util.h"
#include "model/test_model.h"
#include "util/half.h"

namespace qinfer {
namespace {

uint32_t word(const test::EditableTensor& t, size_t i) {
  uint32_t w;
  std::memcpy(&w, t.bytes.data() + 4 * i, 4);
  return w;
}

float fp16_at(const test::EditableTensor& t, size_t i) {
  uint16_t h;
  std::memcpy(&h, t.bytes.data() + 2 * i, 2);
  return fp16_to_float(h);
}

float f32_at(const test::EditableTensor& t, size_t i) {
  float f;
  std::memcpy(&f, t.bytes.data() + 4 * i, 4);
  return f;
}

// E4M3 "fn": sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is subnormal (no NaNs in these weights).
float e4m3(uint8_t b) {
  const int exponent = (b >> 3) & 15, mantissa = b & 7;
  const float magnitude =
      exponent == 0 ? std::ldexp(mantissa / 8.0f, -6) : std::ldexp(1 + mantissa / 8.0f, exponent - 7);
  return (b & 0x80) ? -magnitude : magnitude;
}

// W [out, in] of one quantized module, from its checkpoint tensors.
std::vector<float> dequantize_module(std::vector<test::EditableTensor>& ts, const std::string& module,
                                     const QuantizationConfig& q, int64_t out, int64_t in) {
  std::vector<float> w(static_cast<size_t>(out * in));
  auto at = [&](int64_t n, int64_t k) -> float& { return w[static_cast<size_t>(n * in + k)]; };
  if (q.method == QuantMethod::kFp8) {
    const auto& weight = test::find_tensor(ts, module + ".weight");
    const auto& scale = test::find_tensor(ts, module + ".weight_scale_inv");
    const int64_t scale_cols = scale.header.shape[1];
    for (int64_t n = 0; n < out; ++n)
      for (int64_t k = 0; k < in; ++k)
        at(n, k) = e4m3(static_cast<uint8_t>(weight.bytes[static_cast<size_t>(n * in + k)])) *
                   f32_at(scale, static_cast<size_t>((n / 128) * scale_cols + k / 128));
    return w;
  }
  const auto& qweight = test::find_tensor(ts, module + ".qweight");
  const auto& qzeros = test::find_tensor(ts, module + ".qzeros");
  const auto& scales = test::find_tensor(ts, module + ".scales");
  const int64_t groups = in / q.group_size;
  std::vector<int> ints(static_cast<size_t>(in * out)), zeros(static_cast<size_t>(groups * out));  // [in][out]
  const int order_map[8] = {0, 2, 4, 6, 1, 3, 5, 7};  // AutoAWQ: nibble i holds column order_map[i]
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < out / 8; ++c)
      for (int i = 0; i < 8; ++i) {
        const int column = q.method == QuantMethod::kAwq ? order_map[i] : i;
        const int nibble = static_cast<int>((word(qzeros, static_cast<size_t>(g * (out / 8) + c)) >> (4 * i)) & 15);
        zeros[static_cast<size_t>(g * out + 8 * c + column)] = nibble + q.gptq_zero_offset;
      }
  if (q.method == QuantMethod::kAwq) {
    for (int64_t k = 0; k < in; ++k)
      for (int64_t c = 0; c < out / 8; ++c)
        for (int i = 0; i < 8; ++i)
          ints[static_cast<size_t>(k * out + 8 * c + order_map[i])] =
              static_cast<int>((word(qweight, static_cast<size_t>(k * (out / 8) + c)) >> (4 * i)) & 15);
  } else {
    for (int64_t r = 0; r < in / 8; ++r)
      for (int64_t n = 0; n < out; ++n)
        for (int j = 0; j < 8; ++j)
          ints[static_cast<size_t>((8 * r + j) * out + n)] =
              static_cast<int>((word(qweight, static_cast<size_t>(r * out + n)) >> (4 * j)) & 15);
  }
  for (int64_t n = 0; n < out; ++n)
    for (int64_t k = 0; k < in; ++k) {
      const size_t gi = static_cast<size_t>((k / q.group_size) * out + n);
      at(n, k) = static_cast<float>(ints[static_cast<size_t>(k * out + n)] - zeros[gi]) * fp16_at(scales, gi);
    }
  return w;
}

// Writes `dense_dir`: the checkpoint of `quantized_dir` with every tensor as F32 and no quantization_config.
void write_dequantized_f32(const std::filesystem::path& quantized_dir, const std::filesystem::path& dense_dir,
                           const ModelConfig& config) {
  auto ts = test::read_tensors(quantized_dir / "model.safetensors");
  std::vector<test::EditableTensor> out;
  auto f32 = [](const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values) {
    test::EditableTensor t{{name, DType::kF32, std::move(shape)}, std::vector<std::byte>(values.size() * 4)};
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    return t;
  };
  for (const auto& [name, shape] : qwen3_tensor_shapes(config)) {
    const std::string module = name.substr(0, name.size() - 7);  // without ".weight"
    if (shape.size() == 2 && config.quantization.quantizes(module) && name.rfind("model.layers.", 0) == 0) {
      out.push_back(f32(name, shape, dequantize_module(ts, module, config.quantization, shape[0], shape[1])));
      continue;
    }
    const auto& t = test::find_tensor(ts, name);
    std::vector<float> values(t.bytes.size() / 2);
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t b;
      std::memcpy(&b, t.bytes.data() + 2 * i, 2);
      values[i] = bf16_to_float(b);
    }
    out.push_back(f32(name, shape, values));
  }
  std::filesystem::create_directories(dense_dir);
  test::write_tensors(dense_dir / "model.safetensors", out);
  ModelConfig dense = config;
  dense.quantization = {};
  dense.dtype = DType::kF32;
  std::ofstream(dense_dir / "config.json") << model_config_to_json(dense).dump(2);
}

struct QuantCase {
  const char* name;
  const char* preset;
  QuantizationConfig quantization;
  double max_relative_rms;  // of the quantized model's logits against the bf16 model's
};

void PrintTo(const QuantCase& c, std::ostream* os) { *os << c.name; }

QuantizationConfig awq_without_down_proj() {
  QuantizationConfig q = awq_quantization(128);
  q.modules_to_not_convert = {"mlp.down_proj"};
  return q;
}

class CpuQuantized : public ::testing::TestWithParam<QuantCase> {};

std::vector<float> logits_of(const std::shared_ptr<const LoadedModel>& model) {
  BackendOptions o;
  o.device = "cpu";
  o.max_model_len = 256;
  o.kv_cache_bytes = int64_t{32} << 20;
  auto backend = create_backend(model, o);
  const SamplingParams greedy{.temperature = 0};
  const std::vector<int32_t> a = testing::spread_prompt(9, 1), b = testing::spread_prompt(4, 2);
  const std::vector<int32_t> table_a = {0}, table_b = {1};
  Batch batch;
  batch.token_ids = a;
  batch.token_ids.insert(batch.token_ids.end(), b.begin(), b.end());
  batch.sequences = {testing::batch_sequence(9, 0, table_a, &greedy), testing::batch_sequence(4, 0, table_b, &greedy)};
  return backend->forward_logits(batch);
}

TEST_P(CpuQuantized, LogitsEqualTheDequantizedF32Checkpoint) {
  const QuantCase& param = GetParam();
  const auto root =
      std::filesystem::temp_directory_path() / ("qinfer-cpu-quant-" + std::to_string(::getpid()) + "-" + param.name);
  ModelConfig config = test_model_preset(param.preset);
  const ModelConfig dense_config = config;
  config.quantization = param.quantization;
  write_test_model(root / "quantized", config, 21, std::nullopt, nullptr);
  write_dequantized_f32(root / "quantized", root / "f32", config);

  auto quantized = std::make_shared<const LoadedModel>(load_model(root / "quantized"));
  auto f32 = std::make_shared<const LoadedModel>(load_model(root / "f32"));
  ASSERT_NE(quantized->weights.layers[0].q_proj.format(), WeightFormat::kDense);
  const std::vector<float> ours = logits_of(quantized), reference = logits_of(f32);
  ASSERT_EQ(ours.size(), reference.size());
  for (size_t i = 0; i < ours.size(); ++i)
    ASSERT_NEAR(ours[i], reference[i], 1e-5 * (1 + std::fabs(reference[i]))) << "logit " << i;

  // Against the unquantized weights the quantized logits move, but only as far as the format's precision.
  const std::vector<float> bf16 =
      logits_of(std::make_shared<const LoadedModel>(make_dummy_model(dense_config, 21, nullptr)));
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    diff += (ours[i] - bf16[i]) * (ours[i] - bf16[i]);
    norm += bf16[i] * bf16[i];
  }
  const double relative_rms = std::sqrt(diff / norm);
  EXPECT_LT(relative_rms, param.max_relative_rms);
  EXPECT_GT(relative_rms, 1e-4);  // the weights really are quantized
  std::filesystem::remove_all(root);
}

INSTANTIATE_TEST_SUITE_P(Formats, CpuQuantized,
                         ::testing::Values(QuantCase{"AwqGroup128", "tiny", awq_quantization(128), 0.3},
                                           QuantCase{"AwqGroup64Untied", "tiny-untied", awq_quantization(64), 0.3},
                                           QuantCase{"AwqDenseDownProj", "tiny", awq_without_down_proj(), 0.3},
                                           QuantCase{"GptqGroup64Untied", "tiny-untied", gptq_quantization(64), 0.3},
                                           QuantCase{"Fp8PartialBlocksUntied", "tiny-untied", fp8_block_quantization(),
                                                     0.12},
                                           QuantCase{"Fp8", "tiny", fp8_block_quantization(), 0.12}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace qinfer
