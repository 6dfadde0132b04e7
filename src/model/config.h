// Model hyper-parameters of the Qwen3 dense family, read from a Hugging Face config.json (+ generation_config.json).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/dtype.h"
#include "model/quantization_config.h"

namespace qinfer {

// Sampling defaults a model ships in generation_config.json (model-card values when absent).
struct GenerationDefaults {
  double temperature = 1.0;
  double top_p = 1.0;
  int top_k = 0;  // 0 = off
  double min_p = 0.0;
  double repetition_penalty = 1.0;
};

struct ModelConfig {
  std::string architecture;  // "Qwen3ForCausalLM"
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // Qwen3 sets it explicitly; q width = num_heads * head_dim may differ from hidden_size
  int vocab_size = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 1e6;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  DType dtype = DType::kBF16;  // torch_dtype / dtype of the checkpoint
  std::vector<int32_t> eos_token_ids;
  std::vector<int32_t> bos_token_ids;
  GenerationDefaults generation;
  QuantizationConfig quantization;  // config.json's quantization_config (kNone when absent)

  int q_width() const { return num_heads * head_dim; }
  int kv_width() const { return num_kv_heads * head_dim; }
  // Number of parameters (embedding counted once when tied).
  int64_t num_parameters() const;
};

// Parses config.json (and generation_config.json when given and present). Refuses other architectures, rope_scaling
// types, sliding windows, quantization formats (parse_quantization_config) and inconsistent head counts with
// Error(kUnsupported / kFormat) naming file and field.
ModelConfig parse_model_config(const nlohmann::json& config, const std::filesystem::path& config_path,
                               const nlohmann::json* generation_config = nullptr,
                               const std::filesystem::path& generation_path = {});

// Reads DIR/config.json and DIR/generation_config.json (optional).
ModelConfig load_model_config(const std::filesystem::path& model_dir);

// The inverse of parse_model_config, in Hugging Face's field names.
nlohmann::json model_config_to_json(const ModelConfig& config);
nlohmann::json generation_config_to_json(const ModelConfig& config);

}  // namespace qinfer
