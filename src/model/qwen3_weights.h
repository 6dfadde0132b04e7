// Binding of checkpoint tensors to the Qwen3 dense layout, with every shape checked against the config.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"

namespace qinfer {

struct Qwen3LayerWeights {
  TensorView input_norm;      // [hidden]
  TensorView q_proj;          // [num_heads*head_dim, hidden]
  TensorView k_proj;          // [num_kv_heads*head_dim, hidden]
  TensorView v_proj;          // [num_kv_heads*head_dim, hidden]
  TensorView q_norm;          // [head_dim], shared by all q heads
  TensorView k_norm;          // [head_dim], shared by all kv heads
  TensorView o_proj;          // [hidden, num_heads*head_dim]
  TensorView post_attn_norm;  // [hidden]
  TensorView gate_proj;       // [intermediate, hidden]
  TensorView up_proj;         // [intermediate, hidden]
  TensorView down_proj;       // [hidden, intermediate]
};

struct Qwen3Weights {
  TensorView embed_tokens;  // [vocab, hidden]
  std::vector<Qwen3LayerWeights> layers;
  TensorView final_norm;  // [hidden]
  TensorView lm_head;     // [vocab, hidden]; the embedding itself when tie_word_embeddings
};

// A model ready for a backend: config, weights and whatever keeps the weights' bytes alive (a mapped checkpoint or
// generated buffers). Immutable after loading; shared by reference.
struct LoadedModel {
  ModelConfig config;
  Qwen3Weights weights;
  std::shared_ptr<const void> storage;
};

// Binds and validates: every tensor present, shape as the config says, one floating dtype throughout.
// Throws Error naming the tensor, the expected and the actual shape.
Qwen3Weights bind_qwen3_weights(const ModelConfig& config, const std::function<TensorView(const std::string&)>& lookup,
                                const std::function<bool(const std::string&)>& contains);

// Opens DIR (config.json, generation_config.json, safetensors) and binds the weights.
LoadedModel load_model(const std::filesystem::path& model_dir);

// Names of all tensors of a Qwen3 checkpoint with their shapes, in checkpoint order.
std::vector<std::pair<std::string, std::vector<int64_t>>> qwen3_tensor_shapes(const ModelConfig& config);

}  // namespace qinfer
