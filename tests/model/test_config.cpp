// config.json parsing: Qwen3 fields, head_dim independent of hidden/heads, refusals with the field named.
#include <gtest/gtest.h>

#include <fstream>

#include "model/config.h"
#include "util/error.h"
#include "util/json_file.h"

namespace qinfer {
namespace {

nlohmann::json qwen3_4b() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2560, "intermediate_size": 9728,
    "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "rms_norm_eps": 1e-06, "rope_theta": 5000000, "rope_scaling": null, "max_position_embeddings": 262144,
    "tie_word_embeddings": true, "vocab_size": 151936, "torch_dtype": "bfloat16", "eos_token_id": 151645,
    "bos_token_id": 151643, "hidden_act": "silu", "attention_bias": false, "use_sliding_window": false})");
}

std::string error_of(const nlohmann::json& j) {
  try {
    parse_model_config(j, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, ParsesQwen3_4B) {
  ModelConfig c = parse_model_config(qwen3_4b(), "config.json");
  EXPECT_EQ(c.hidden_size, 2560);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.q_width(), 4096);  // != hidden
  EXPECT_EQ(c.kv_width(), 1024);
  EXPECT_DOUBLE_EQ(c.rope_theta, 5e6);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{151645});
  // 4.02 B parameters with the tied embedding counted once.
  EXPECT_NEAR(static_cast<double>(c.num_parameters()) / 1e9, 4.02, 0.01);
}

TEST(ModelConfig, GenerationConfigOverridesEosAndSampling) {
  auto gen = nlohmann::json::parse(
      R"({"eos_token_id": [151645, 151643], "temperature": 0.7, "top_p": 0.8, "top_k": 20, "do_sample": true})");
  ModelConfig c = parse_model_config(qwen3_4b(), "config.json", &gen, "generation_config.json");
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_FLOAT_EQ(static_cast<float>(c.generation.temperature), 0.7f);
  EXPECT_EQ(c.generation.top_k, 20);
}

TEST(ModelConfig, HeadDimDefaultsToHiddenOverHeads) {
  auto j = qwen3_4b();
  j.erase("head_dim");
  EXPECT_EQ(parse_model_config(j, "config.json").head_dim, 80);
}

TEST(ModelConfig, RefusesOtherArchitecturesAndRopeScaling) {
  auto j = qwen3_4b();
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  EXPECT_NE(error_of(j).find("LlamaForCausalLM"), std::string::npos);
  j = qwen3_4b();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_NE(error_of(j).find("rope_scaling type 'yarn'"), std::string::npos);
  j = qwen3_4b();
  j["use_sliding_window"] = true;
  EXPECT_NE(error_of(j).find("use_sliding_window"), std::string::npos);
}

TEST(ModelConfig, NamesMissingAndMistypedFields) {
  auto j = qwen3_4b();
  j.erase("hidden_size");
  EXPECT_NE(error_of(j).find("missing field 'hidden_size'"), std::string::npos);
  j = qwen3_4b();
  j["num_hidden_layers"] = "36";
  EXPECT_NE(error_of(j).find("'num_hidden_layers' expected an integer"), std::string::npos);
  j = qwen3_4b();
  j["num_key_value_heads"] = 5;
  EXPECT_NE(error_of(j).find("multiple of num_key_value_heads"), std::string::npos);
  j = qwen3_4b();
  j["eos_token_id"] = 200000;
  EXPECT_NE(error_of(j).find("outside the vocabulary"), std::string::npos);
  j = qwen3_4b();
  j["torch_dtype"] = "float8";
  EXPECT_NE(error_of(j).find("float8"), std::string::npos);
}

TEST(ModelConfig, RoundTripsThroughJson) {
  ModelConfig c = parse_model_config(qwen3_4b(), "config.json");
  ModelConfig back = parse_model_config(model_config_to_json(c), "config.json");
  EXPECT_EQ(back.num_parameters(), c.num_parameters());
  EXPECT_EQ(back.head_dim, c.head_dim);
  EXPECT_DOUBLE_EQ(back.rope_theta, c.rope_theta);
}

TEST(ReadJsonFile, MissingAndMalformedFiles) {
  try {
    read_json_file("/nonexistent/config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotFound);
  }
  auto path = std::filesystem::temp_directory_path() / ("qinfer-bad-" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << "{\"a\": 1,";
  try {
    read_json_file(path);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos);
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace qinfer
