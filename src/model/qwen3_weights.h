// Binding of checkpoint tensors to the Qwen3 dense layout, with every shape checked against the config. Linear layers
// are LinearWeights in the checkpoint's own format (dense, AWQ, GPTQ, FP8); embeddings, lm_head and norms are dense.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/linear_binding.h"
#include "model/linear_weight.h"
#include "model/safetensors.h"

namespace qinfer {

struct Qwen3LayerWeights {
  TensorView input_norm;      // [hidden]
  LinearWeight q_proj;        // [num_heads*head_dim, hidden]
  LinearWeight k_proj;        // [num_kv_heads*head_dim, hidden]
  LinearWeight v_proj;        // [num_kv_heads*head_dim, hidden]
  TensorView q_norm;          // [head_dim], shared by all q heads
  TensorView k_norm;          // [head_dim], shared by all kv heads
  LinearWeight o_proj;        // [hidden, num_heads*head_dim]
  TensorView post_attn_norm;  // [hidden]
  LinearWeight gate_proj;     // [intermediate, hidden]
  LinearWeight up_proj;       // [intermediate, hidden]
  LinearWeight down_proj;     // [hidden, intermediate]
};

struct Qwen3Weights {
  TensorView embed_tokens;  // [vocab, hidden], dense in every format
  std::vector<Qwen3LayerWeights> layers;
  TensorView final_norm;  // [hidden]
  TensorView lm_head;     // [vocab, hidden], dense; the embedding itself when tie_word_embeddings
};

// The seven linears of a layer with their module names ("model.layers.L.self_attn.q_proj"), in checkpoint order.
std::vector<std::pair<std::string, LinearWeight*>> layer_linears(Qwen3LayerWeights& layer, int layer_index);
// Whether any linear is stored in a format other than dense.
bool has_quantized_linears(const Qwen3Weights& weights);

// A model ready for a backend: config, weights and whatever keeps the weights' bytes alive (a mapped checkpoint or
// generated buffers). Immutable after loading; shared by reference.
struct LoadedModel {
  ModelConfig config;
  Qwen3Weights weights;
  std::shared_ptr<const void> storage;
};

// Binds and validates: every tensor present, shape as the config says, one floating dtype for the dense tensors,
// linears in the format config.quantization gives them (bind_linear), no tensor left over that changes the math
// (a `.bias`; other unused tensors are logged). Throws Error naming the tensor, the expected and the actual shape.
Qwen3Weights bind_qwen3_weights(const ModelConfig& config, const TensorSource& source);

// Opens DIR (config.json, generation_config.json, safetensors) and binds the weights.
LoadedModel load_model(const std::filesystem::path& model_dir);

// Names of all tensors of a dense Qwen3 checkpoint with their shapes, in checkpoint order.
std::vector<std::pair<std::string, std::vector<int64_t>>> qwen3_tensor_shapes(const ModelConfig& config);

}  // namespace qinfer
