// config.json parsing: Qwen3 fields, head_dim independent of hidden/heads, refusals with the field named.
#include <gtest/gtest.h>

#include <fstream>
#include <limits>

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
  EXPECT_NE(error_of(j).find("field 'eos_token_id' must be a token id in [0, 151936)"), std::string::npos);
  j = qwen3_4b();
  j["torch_dtype"] = "float8";
  EXPECT_NE(error_of(j).find("float8"), std::string::npos);
}

// One bad value per field: the error is a format error (exit 4) naming the file, the field, the expected range and
// the value found.
struct BadValue {
  const char* field;  // a dotted path for nested objects: rope_scaling.factor
  nlohmann::json value;
  const char* expected;  // what the message says the field must be
  const char* actual;
};

nlohmann::json with_value(nlohmann::json j, const std::string& path, const nlohmann::json& value) {
  nlohmann::json* at = &j;
  for (size_t start = 0, dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1)
    at = &(*at)[path.substr(start, dot - start)];
  (*at)[path.substr(path.rfind('.') + 1)] = value;
  return j;
}

void expect_refused(const std::string& message, const std::string& file, const BadValue& bad) {
  EXPECT_NE(message.find(file + ": field '" + bad.field + "'"), std::string::npos) << bad.field << ": " << message;
  EXPECT_NE(message.find(bad.expected), std::string::npos) << bad.field << ": " << message;
  EXPECT_NE(message.find(std::string("got ") + bad.actual), std::string::npos) << bad.field << ": " << message;
}

TEST(ModelConfig, RefusesOutOfRangeConfigFields) {
  // JSON text has no infinity (and the parser refuses 1e400), but a config built in code can hold one.
  const nlohmann::json huge = std::numeric_limits<double>::infinity();
  const std::vector<BadValue> cases = {
      {"hidden_size", 0, "positive", "0"},
      {"intermediate_size", -1, "positive", "-1"},
      {"num_hidden_layers", 0, "positive", "0"},
      {"num_attention_heads", -32, "positive", "-32"},
      {"num_key_value_heads", 0, "positive", "0"},
      {"vocab_size", 0, "positive", "0"},
      {"head_dim", 0, "positive", "0"},
      {"head_dim", 127, "even for RoPE", "127"},
      {"head_dim", 1 << 30, "a q width within int32", "1073741824"},
      {"rms_norm_eps", 0.0, "positive and finite", "0"},
      {"rms_norm_eps", -1e-6, "positive and finite", "-1e-06"},
      {"rms_norm_eps", huge, "positive and finite", "inf"},
      {"rope_theta", 0, "positive and finite", "0"},
      {"rope_theta", huge, "positive and finite", "inf"},
      {"max_position_embeddings", 0, "in [1, 2147483647]", "0"},
      {"max_position_embeddings", int64_t{1} << 31, "in [1, 2147483647]", "2147483648"},
      {"rope_scaling.factor", -4.0, "positive and finite", "-4"},
      {"rope_scaling.original_max_position_embeddings", 0, "positive", "0"},
      {"rope_parameters.rope_theta", 0.0, "positive and finite", "0"},
  };
  for (const BadValue& bad : cases) {
    auto j = with_value(qwen3_4b(), bad.field, bad.value);
    if (std::string(bad.field).starts_with("rope_scaling")) j["rope_scaling"]["rope_type"] = "yarn";
    try {
      parse_model_config(j, "config.json");
      ADD_FAILURE() << bad.field << " = " << bad.value.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat) << e.what();
      expect_refused(e.what(), "config.json", bad);
    }
  }
}

TEST(ModelConfig, RefusesIntegersThatDoNotFitInsteadOfNarrowingThem) {
  // 2^32 + 2560 would read as 2560 if cut to 32 bits.
  for (const char* field : {"hidden_size", "num_hidden_layers", "vocab_size", "head_dim", "eos_token_id"}) {
    auto j = qwen3_4b();
    j[field] = (int64_t{1} << 32) + 2560;
    const std::string message = error_of(j);
    EXPECT_NE(message.find(std::string("config.json: field '") + field +
                           "' expected an integer in [-2147483648, "
                           "2147483647], got 4294969856"),
              std::string::npos)
        << message;
  }
  auto j = qwen3_4b();
  j["bos_token_id"] = nlohmann::json::array({1, uint64_t{1} << 63});
  EXPECT_NE(error_of(j).find("field 'bos_token_id' expected an integer in"), std::string::npos);
  j = qwen3_4b();
  j["max_position_embeddings"] = uint64_t{1} << 63;  // past int64 as well
  EXPECT_NE(error_of(j).find("field 'max_position_embeddings' expected an integer in"), std::string::npos);
}

TEST(ModelConfig, RefusesOutOfRangeGenerationDefaults) {
  const std::vector<BadValue> cases = {
      {"temperature", -0.5, "in [0, 100]", "-0.5"},
      {"temperature", 1000, "in [0, 100]", "1000"},
      {"top_p", 0.0, "in (0, 1]", "0"},
      {"top_p", 1.5, "in (0, 1]", "1.5"},
      {"top_k", -2, "-1, 0 or in [1, 151936]", "-2"},
      {"top_k", 200000, "-1, 0 or in [1, 151936]", "200000"},
      {"top_k", int64_t{1} << 32, "an integer in [-2147483648, 2147483647]", "4294967296"},
      {"min_p", 1.01, "in [0, 1]", "1.01"},
      {"repetition_penalty", 0.0, "in (0, 10]", "0"},
      {"repetition_penalty", 11, "in (0, 10]", "11"},
      {"eos_token_id", nlohmann::json::array({151645, -1}), "a token id in [0, 151936)", "-1"},
  };
  for (const BadValue& bad : cases) {
    nlohmann::json gen = {{"temperature", 0.7}, {"top_p", 0.8}, {"top_k", 20}, {"do_sample", true}};
    gen[bad.field] = bad.value;
    try {
      parse_model_config(qwen3_4b(), "config.json", &gen, "generation_config.json");
      ADD_FAILURE() << bad.field << " = " << bad.value.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat) << e.what();
      expect_refused(e.what(), "generation_config.json", bad);
    }
  }
  // The edges of each range are accepted.
  nlohmann::json gen = {{"temperature", 0}, {"top_p", 1}, {"top_k", -1}, {"min_p", 1}, {"repetition_penalty", 10}};
  ModelConfig c = parse_model_config(qwen3_4b(), "config.json", &gen, "generation_config.json");
  EXPECT_EQ(c.generation.top_k, -1);
  EXPECT_DOUBLE_EQ(c.generation.repetition_penalty, 10.0);
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
