// Generated quantized checkpoints (the same bytes from file, dummy weights and online FP8) and the loader's refusal
// of every malformed one: a clear Error naming the file, the tensor, expected and actual, of kind kFormat (exit 4) or
// kUnsupported (exit 5); random corruptions never crash.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "testing/checkpoint_edit.h"
#include "model/online_quantization.h"
#include "model/test_model.h"
#include "util/error.h"
#include "util/half.h"

namespace qinfer {
namespace {

class QuantizedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("qinfer-quant-" + std::to_string(::getpid()) + "-" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ModelConfig write(QuantizationConfig q, const std::string& preset = "tiny") {
    ModelConfig c = test_model_preset(preset);
    c.quantization = std::move(q);
    write_test_model(dir_, c, 4, std::nullopt, nullptr);
    return c;
  }

  // Loading must fail with `kind`; the message must contain every one of `parts`.
  void expect_refused(ErrorKind kind, std::initializer_list<std::string> parts) {
    try {
      load_model(dir_);
      ADD_FAILURE() << "loaded";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }

  std::filesystem::path dir_;
};

bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.num_bytes == b.num_bytes &&
         std::memcmp(a.data, b.data, a.num_bytes) == 0;
}

TEST_F(QuantizedCheckpoint, FileAndDummyWeightsAreTheSameBytes) {
  ModelConfig c = write(awq_quantization(64), "tiny-untied");
  LoadedModel file = load_model(dir_);
  LoadedModel dummy = make_dummy_model(c, 4, nullptr);
  ASSERT_EQ(file.weights.layers[1].down_proj.format(), WeightFormat::kAwq);
  const AwqWeight& a = file.weights.layers[1].down_proj.awq();
  const AwqWeight& b = dummy.weights.layers[1].down_proj.awq();
  EXPECT_TRUE(same_bytes(a.qweight, b.qweight));
  EXPECT_TRUE(same_bytes(a.qzeros, b.qzeros));
  EXPECT_TRUE(same_bytes(a.scales, b.scales));
  EXPECT_EQ(a.group_size, 64);
  EXPECT_EQ(file.weights.embed_tokens.dtype, DType::kBF16);  // embeddings, lm_head and norms stay dense
  EXPECT_EQ(file.weights.lm_head.dtype, DType::kBF16);
}

TEST_F(QuantizedCheckpoint, OnlineFp8IsTheFp8CheckpointsRepresentation) {
  ModelConfig c = write(fp8_block_quantization(), "tiny-untied");
  LoadedModel fp8_file = load_model(dir_);
  c.quantization = {};
  LoadedModel online = quantize_fp8_on_load(make_dummy_model(c, 4, nullptr), nullptr);
  EXPECT_EQ(online.config.quantization.method, QuantMethod::kFp8);
  EXPECT_TRUE(online.config.quantization.online);
  for (int l = 0; l < c.num_layers; ++l) {
    auto file_linears = layer_linears(fp8_file.weights.layers[static_cast<size_t>(l)], l);
    auto online_linears = layer_linears(online.weights.layers[static_cast<size_t>(l)], l);
    for (size_t i = 0; i < file_linears.size(); ++i) {
      SCOPED_TRACE(file_linears[i].first);
      const Fp8BlockWeight& a = file_linears[i].second->fp8();
      const Fp8BlockWeight& b = online_linears[i].second->fp8();
      EXPECT_TRUE(same_bytes(a.weight, b.weight));
      EXPECT_TRUE(same_bytes(a.scale_inv, b.scale_inv));
      EXPECT_EQ(a.scale_inv.shape, (std::vector<int64_t>{(file_linears[i].second->out_features + 127) / 128,
                                                         (file_linears[i].second->in_features + 127) / 128}));
    }
  }
}

TEST_F(QuantizedCheckpoint, ModulesToNotConvertStayDense) {
  QuantizationConfig q = gptq_quantization(128);
  q.modules_to_not_convert = {"mlp.down_proj"};
  write(q);
  LoadedModel m = load_model(dir_);
  EXPECT_EQ(m.weights.layers[0].down_proj.format(), WeightFormat::kDense);
  EXPECT_EQ(m.weights.layers[0].up_proj.format(), WeightFormat::kGptq);
  EXPECT_TRUE(m.weights.layers[0].up_proj.gptq().symmetric);
  EXPECT_EQ(m.weights.layers[0].up_proj.gptq().zero_offset, 1);
}

TEST_F(QuantizedCheckpoint, MissingOrMisshapedAwqTensorsAreNamed) {
  write(awq_quantization(128));
  const std::string t = "model.layers.1.self_attn.o_proj.";  // [hidden 256, q width 512]
  test::edit_tensors(dir_, [&](auto& ts) { test::erase_tensor(ts, t + "qzeros"); });
  expect_refused(ErrorKind::kFormat, {dir_.string(), t + "qzeros", "missing", "awq", "[4, 32]"});

  write(awq_quantization(128));
  test::edit_tensors(dir_, [&](auto& ts) { test::find_tensor(ts, t + "qweight").header.shape = {32, 512}; });
  expect_refused(ErrorKind::kFormat, {"model.safetensors", t + "qweight", "[32, 512]", "expected [512, 32]"});

  write(awq_quantization(128));
  test::edit_tensors(dir_, [&](auto& ts) {
    auto& s = test::find_tensor(ts, t + "scales");
    s.header.dtype = DType::kBF16;  // same bytes, another dtype
  });
  expect_refused(ErrorKind::kFormat, {t + "scales", "BF16", "expected F16"});

  write(awq_quantization(128));
  test::edit_tensors(dir_, [&](auto& ts) {
    auto& s = test::find_tensor(ts, t + "scales");
    const uint16_t nan = 0x7e00;
    std::memcpy(s.bytes.data() + 6, &nan, 2);
  });
  expect_refused(ErrorKind::kFormat, {t + "scales", "flat index 3", "finite"});

  write(awq_quantization(128));
  test::edit_tensors(dir_, [&](auto& ts) {
    ts.push_back({{t + "weight", DType::kBF16, {256, 512}}, std::vector<std::byte>(256 * 512 * 2)});
  });
  expect_refused(ErrorKind::kFormat, {t + "weight", "beside the AWQ tensors"});
}

TEST_F(QuantizedCheckpoint, GptqGidxAndSymmetricZerosAreChecked) {
  const std::string t = "model.layers.0.mlp.down_proj.";  // [256, 768]
  write(gptq_quantization(128));
  test::edit_tensors(dir_, [&](auto& ts) {
    auto& g = test::find_tensor(ts, t + "g_idx");
    const int32_t wrong = 5;
    std::memcpy(g.bytes.data() + 4 * 200, &wrong, 4);
  });
  expect_refused(ErrorKind::kFormat, {t + "g_idx", "input row 200", "group 5", "expected 1"});

  write(gptq_quantization(128));
  test::edit_tensors(dir_, [&](auto& ts) { test::find_tensor(ts, t + "qzeros").bytes[0] = std::byte{0x76}; });
  expect_refused(ErrorKind::kFormat, {t + "qzeros", "zero point 7", "sym"});

  write(gptq_quantization(128));
  test::edit_tensors(dir_, [&](auto& ts) { test::find_tensor(ts, t + "qweight").header.shape = {768, 32}; });
  expect_refused(ErrorKind::kFormat, {t + "qweight", "[768, 32]", "expected [96, 256]"});
}

TEST_F(QuantizedCheckpoint, Fp8ScalesAndWeightsAreChecked) {
  const std::string t = "model.layers.2.mlp.gate_proj.";  // [768, 256]
  write(fp8_block_quantization());
  test::edit_tensors(dir_, [&](auto& ts) { test::erase_tensor(ts, t + "weight_scale_inv"); });
  expect_refused(ErrorKind::kFormat, {t + "weight_scale_inv", "missing", "fp8", "[6, 2]"});

  write(fp8_block_quantization());
  test::edit_tensors(dir_, [&](auto& ts) { test::find_tensor(ts, t + "weight_scale_inv").header.shape = {2, 6}; });
  expect_refused(ErrorKind::kFormat, {t + "weight_scale_inv", "[2, 6]", "expected [6, 2]"});

  write(fp8_block_quantization());
  test::edit_tensors(dir_, [&](auto& ts) {
    auto& w = test::find_tensor(ts, t + "weight");
    w.header.dtype = DType::kBF16;
    w.header.shape = {768, 128};
  });
  expect_refused(ErrorKind::kFormat, {t + "weight", "has dtype BF16", "expected F8_E4M3"});
}

TEST_F(QuantizedCheckpoint, QuantizedTensorsWithoutAConfigAreExplained) {
  write(awq_quantization(128));
  test::edit_config(dir_, [](nlohmann::json& j) { j.erase("quantization_config"); });
  expect_refused(ErrorKind::kFormat, {"model.layers.0.self_attn.q_proj.qweight", "no quantization_config"});

  write(fp8_block_quantization());
  test::edit_config(dir_, [](nlohmann::json& j) { j.erase("quantization_config"); });
  expect_refused(ErrorKind::kFormat, {"model.layers.0.self_attn.q_proj.weight", "F8_E4M3", "no quantization_config"});
}

TEST_F(QuantizedCheckpoint, UnsupportedConfigsAndBiasesAreRefusedAsUnsupported) {
  write(awq_quantization(128));
  test::edit_config(dir_, [](nlohmann::json& j) { j["quantization_config"]["version"] = "gemv"; });
  expect_refused(ErrorKind::kUnsupported, {"config.json", "quantization_config.version", "gemv"});

  write(gptq_quantization(128));
  test::edit_config(dir_, [](nlohmann::json& j) { j["quantization_config"]["desc_act"] = true; });
  expect_refused(ErrorKind::kUnsupported, {"quantization_config.desc_act"});

  write(gptq_quantization(128));
  test::edit_tensors(dir_, [](auto& ts) {
    ts.push_back({{"model.layers.0.self_attn.q_proj.bias", DType::kBF16, {512}}, std::vector<std::byte>(1024)});
  });
  expect_refused(ErrorKind::kUnsupported, {"model.layers.0.self_attn.q_proj.bias", "bias"});
}

TEST_F(QuantizedCheckpoint, GroupsThatDoNotDivideTheModelAreRefused) {
  // tiny-untied has hidden 192: a group of 128 does not divide q_proj's input.
  ModelConfig c = test_model_preset("tiny-untied");
  c.quantization = awq_quantization(128);
  try {
    make_dummy_model(c, 1, nullptr);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("192 is not a multiple of 128"), std::string::npos) << e.what();
  }
}

// Random corruptions of a quantized checkpoint's tensors (dtype, shape, presence, bytes) and config: loading either
// works or throws qinfer::Error of a file kind; it never crashes or throws anything else.
TEST_F(QuantizedCheckpoint, RandomCorruptionsGiveErrorsNotCrashes) {
  const std::vector<QuantizationConfig> formats = {awq_quantization(64), gptq_quantization(64),
                                                   fp8_block_quantization()};
  std::mt19937 rng(12345);
  int refused = 0;
  for (int iteration = 0; iteration < 36; ++iteration) {
    write(formats[static_cast<size_t>(iteration) % formats.size()]);
    const int what = static_cast<int>(rng() % 5);
    if (what == 4) {
      test::edit_config(dir_, [&](nlohmann::json& j) {
        auto& q = j["quantization_config"];
        const auto key = std::next(q.begin(), static_cast<long>(rng() % q.size())).key();
        const nlohmann::json replacements[] = {nullptr, -1, 0, 3, 1 << 30, "x", nlohmann::json::array(), true};
        q[key] = replacements[rng() % 8];
      });
    } else {
      test::edit_tensors(dir_, [&](std::vector<test::EditableTensor>& ts) {
        auto& t = ts[rng() % ts.size()];
        if (what == 0) {
          const DType dtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kI32};
          t.header.dtype = dtypes[rng() % 5];
          t.header.shape = {static_cast<int64_t>(t.bytes.size() / dtype_size(t.header.dtype))};
          t.bytes.resize(static_cast<size_t>(t.header.shape[0]) * dtype_size(t.header.dtype));
        } else if (what == 1 && t.header.shape.size() == 2) {
          std::swap(t.header.shape[0], t.header.shape[1]);
        } else if (what == 2) {
          t.header.name += ".renamed";
        } else {
          for (int i = 0; i < 16 && !t.bytes.empty(); ++i) t.bytes[rng() % t.bytes.size()] = std::byte{0xff};
        }
      });
    }
    try {
      load_model(dir_);
    } catch (const Error& e) {
      ++refused;
      EXPECT_TRUE(e.kind() == ErrorKind::kFormat || e.kind() == ErrorKind::kUnsupported ||
                  e.kind() == ErrorKind::kNotFound)
          << e.what();
    }
  }
  EXPECT_GT(refused, 18);
}

}  // namespace
}  // namespace qinfer
