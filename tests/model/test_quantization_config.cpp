// config.json's quantization_config: the fields of real AutoAWQ, GPTQ and Qwen FP8 checkpoints, and every refusal
// naming its field with the exit code's kind (4 malformed, 5 unsupported).
#include <gtest/gtest.h>

#include "model/config.h"
#include "model/quantization_config.h"
#include "model/test_model.h"
#include "util/error.h"

namespace qinfer {
namespace {

QuantizationConfig parse(const std::string& text) {
  return parse_quantization_config(nlohmann::json::parse(text), "config.json");
}

TEST(QuantizationConfig, ReadsAutoAwqGemm) {
  // As AutoAWQ / transformers write it into config.json.
  QuantizationConfig q = parse(
      R"({"bits": 4, "group_size": 128, "modules_to_not_convert": null, "quant_method": "awq", "version": "gemm",
          "zero_point": true})");
  EXPECT_EQ(q.method, QuantMethod::kAwq);
  EXPECT_EQ(q.bits, 4);
  EXPECT_EQ(q.group_size, 128);
  EXPECT_TRUE(q.quantizes("model.layers.0.self_attn.q_proj"));
  // AutoAWQ's own spelling (quant_config.json style), upper-case version, modules kept dense.
  q = parse(R"({"quant_method": "awq", "w_bit": 4, "q_group_size": 64, "version": "GEMM", "zero_point": true,
                "modules_to_not_convert": ["down_proj"]})");
  EXPECT_EQ(q.group_size, 64);
  EXPECT_FALSE(q.quantizes("model.layers.3.mlp.down_proj"));
  EXPECT_TRUE(q.quantizes("model.layers.3.mlp.up_proj"));
}

TEST(QuantizationConfig, ReadsGptqWithItsZeroConvention) {
  QuantizationConfig q = parse(
      R"({"bits": 4, "damp_percent": 0.01, "desc_act": false, "group_size": 128, "quant_method": "gptq",
          "static_groups": false, "sym": true, "true_sequential": true, "model_name_or_path": null})");
  EXPECT_EQ(q.method, QuantMethod::kGptq);
  EXPECT_TRUE(q.symmetric);
  EXPECT_EQ(q.gptq_zero_offset, 1);  // v1 exports store zero - 1
  q = parse(R"({"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": false, "checkpoint_format": "gptq_v2",
                "modules_in_block_to_quantize": [["self_attn.q_proj", "self_attn.k_proj"], ["mlp.down_proj"]]})");
  EXPECT_EQ(q.gptq_zero_offset, 0);
  EXPECT_FALSE(q.symmetric);
  EXPECT_TRUE(q.quantizes("model.layers.0.self_attn.k_proj"));
  EXPECT_FALSE(q.quantizes("model.layers.0.self_attn.v_proj"));
  EXPECT_TRUE(q.quantizes("model.layers.0.mlp.down_proj"));
}

TEST(QuantizationConfig, ReadsQwenFp8) {
  // Qwen/Qwen3-4B-Instruct-2507-FP8's quantization_config.
  QuantizationConfig q = parse(
      R"({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]})");
  EXPECT_EQ(q.method, QuantMethod::kFp8);
  EXPECT_EQ(q.block_out, 128);
  EXPECT_EQ(q.block_in, 128);
  q = parse(R"({"quant_method": "fp8", "weight_block_size": [128, 128], "ignored_layers": ["lm_head", "mlp.gate"]})");
  EXPECT_FALSE(q.quantizes("model.layers.1.mlp.gate_proj"));  // transformers' substring match
}

TEST(QuantizationConfig, RefusesWhatItDoesNotRunNamingTheField) {
  struct Case {
    const char* json;
    ErrorKind kind;
    const char* field;
  };
  const Case cases[] = {
      {R"({"quant_method": "bitsandbytes", "load_in_4bit": true})", ErrorKind::kUnsupported, "quant_method"},
      {R"({"quant_method": "compressed-tensors"})", ErrorKind::kUnsupported, "compressed-tensors"},
      {R"({"bits": 4})", ErrorKind::kFormat, "quant_method"},
      {R"({"quant_method": "awq", "bits": 8, "group_size": 128})", ErrorKind::kUnsupported, "bits"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 256})", ErrorKind::kUnsupported, "group_size"},
      {R"({"quant_method": "awq", "bits": 4})", ErrorKind::kFormat, "group_size"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"})", ErrorKind::kUnsupported,
       "version"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "exllama"})", ErrorKind::kUnsupported,
       "exllama"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "marlin"})", ErrorKind::kUnsupported,
       "marlin"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": false})", ErrorKind::kUnsupported,
       "zero_point"},
      {R"({"quant_method": "awq", "bits": "4", "group_size": 128})", ErrorKind::kFormat, "bits"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "modules_to_not_convert": "lm_head"})",
       ErrorKind::kFormat, "modules_to_not_convert"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": true})", ErrorKind::kUnsupported,
       "desc_act"},
      {R"({"quant_method": "gptq", "bits": 3, "group_size": 128})", ErrorKind::kUnsupported, "bits"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": -1})", ErrorKind::kUnsupported, "group_size"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "checkpoint_format": "marlin"})",
       ErrorKind::kUnsupported, "checkpoint_format"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "lm_head": true})", ErrorKind::kUnsupported,
       "lm_head"},
      {R"({"quant_method": "fp8", "fmt": "e5m2", "weight_block_size": [128, 128]})", ErrorKind::kUnsupported, "fmt"},
      {R"({"quant_method": "fp8", "activation_scheme": "static", "weight_block_size": [128, 128]})",
       ErrorKind::kUnsupported, "activation_scheme"},
      {R"({"quant_method": "fp8", "activation_scheme": "dynamic"})", ErrorKind::kUnsupported, "weight_block_size"},
      {R"({"quant_method": "fp8", "weight_block_size": [64, 64]})", ErrorKind::kUnsupported, "weight_block_size"},
      {R"({"quant_method": "fp8", "weight_block_size": "128"})", ErrorKind::kFormat, "weight_block_size"},
      {R"({"quant_method": "fp8", "weight_block_size": [128, 128], "scale_fmt": "ue8m0"})", ErrorKind::kUnsupported,
       "scale_fmt"},
      {R"([1, 2])", ErrorKind::kFormat, "quantization_config"},
  };
  for (const Case& c : cases) {
    try {
      parse(c.json);
      ADD_FAILURE() << c.json << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), c.kind) << c.json << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
    }
  }
}

TEST(QuantizationConfig, RoundTripsThroughConfigJson) {
  for (const QuantizationConfig& q : {awq_quantization(64), gptq_quantization(128), fp8_block_quantization()}) {
    ModelConfig c = test_model_preset("tiny");
    c.quantization = q;
    ModelConfig back = parse_model_config(model_config_to_json(c), "config.json");
    EXPECT_EQ(back.quantization.method, q.method);
    EXPECT_EQ(back.quantization.group_size, q.group_size);
    EXPECT_EQ(back.quantization.symmetric, q.symmetric);
    EXPECT_EQ(back.quantization.gptq_zero_offset, q.gptq_zero_offset);
    EXPECT_EQ(back.quantization.block_in, q.block_in);
  }
  ModelConfig dense = parse_model_config(model_config_to_json(test_model_preset("tiny")), "config.json");
  EXPECT_FALSE(dense.quantization.quantized());
}

}  // namespace
}  // namespace qinfer
