#include "model/qwen3_weights.h"

#include "util/error.h"

namespace qinfer {

std::vector<std::pair<std::string, std::vector<int64_t>>> qwen3_tensor_shapes(const ModelConfig& c) {
  int64_t h = c.hidden_size, q = c.q_width(), kv = c.kv_width(), ff = c.intermediate_size, d = c.head_dim;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  out.push_back({"model.embed_tokens.weight", {c.vocab_size, h}});
  for (int l = 0; l < c.num_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    out.push_back({p + "input_layernorm.weight", {h}});
    out.push_back({p + "self_attn.q_proj.weight", {q, h}});
    out.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    out.push_back({p + "self_attn.q_norm.weight", {d}});
    out.push_back({p + "self_attn.k_norm.weight", {d}});
    out.push_back({p + "self_attn.o_proj.weight", {h, q}});
    out.push_back({p + "post_attention_layernorm.weight", {h}});
    out.push_back({p + "mlp.gate_proj.weight", {ff, h}});
    out.push_back({p + "mlp.up_proj.weight", {ff, h}});
    out.push_back({p + "mlp.down_proj.weight", {h, ff}});
  }
  out.push_back({"model.norm.weight", {h}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, h}});
  return out;
}

Qwen3Weights bind_qwen3_weights(const ModelConfig& c, const std::function<TensorView(const std::string&)>& lookup,
                                const std::function<bool(const std::string&)>& contains) {
  std::optional<DType> dtype;
  auto get = [&](const std::string& name, const std::vector<int64_t>& shape) {
    TensorView t = lookup(name);
    if (t.shape != shape) {
      TensorView expected;
      expected.shape = shape;
      throw Error(ErrorKind::kFormat, t.file.string() + ": tensor '" + name + "' has shape " + t.shape_string() +
                                          ", expected " + expected.shape_string() + " from config.json");
    }
    if (dtype && t.dtype != *dtype)
      throw Error(ErrorKind::kUnsupported, t.file.string() + ": tensor '" + name + "' is " +
                                               std::string(dtype_name(t.dtype)) + " but earlier tensors are " +
                                               std::string(dtype_name(*dtype)) + "; mixed dtypes are not supported");
    dtype = t.dtype;
    return t;
  };
  int64_t h = c.hidden_size, q = c.q_width(), kv = c.kv_width(), ff = c.intermediate_size, d = c.head_dim;
  Qwen3Weights w;
  w.embed_tokens = get("model.embed_tokens.weight", {c.vocab_size, h});
  for (int l = 0; l < c.num_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    Qwen3LayerWeights lw;
    lw.input_norm = get(p + "input_layernorm.weight", {h});
    lw.q_proj = get(p + "self_attn.q_proj.weight", {q, h});
    lw.k_proj = get(p + "self_attn.k_proj.weight", {kv, h});
    lw.v_proj = get(p + "self_attn.v_proj.weight", {kv, h});
    lw.q_norm = get(p + "self_attn.q_norm.weight", {d});
    lw.k_norm = get(p + "self_attn.k_norm.weight", {d});
    lw.o_proj = get(p + "self_attn.o_proj.weight", {h, q});
    lw.post_attn_norm = get(p + "post_attention_layernorm.weight", {h});
    lw.gate_proj = get(p + "mlp.gate_proj.weight", {ff, h});
    lw.up_proj = get(p + "mlp.up_proj.weight", {ff, h});
    lw.down_proj = get(p + "mlp.down_proj.weight", {h, ff});
    w.layers.push_back(std::move(lw));
  }
  w.final_norm = get("model.norm.weight", {h});
  // Tied checkpoints usually omit lm_head; some carry a copy, which we then use.
  if (!c.tie_word_embeddings || contains("lm_head.weight"))
    w.lm_head = get("lm_head.weight", {c.vocab_size, h});
  else
    w.lm_head = w.embed_tokens;
  return w;
}

LoadedModel load_model(const std::filesystem::path& model_dir) {
  if (!std::filesystem::is_directory(model_dir))
    throw Error(ErrorKind::kNotFound, "model directory " + model_dir.string() + " does not exist");
  LoadedModel m;
  m.config = load_model_config(model_dir);
  auto ckpt = std::make_shared<Checkpoint>(Checkpoint::open(model_dir));
  m.weights = bind_qwen3_weights(
      m.config, [&](const std::string& n) { return ckpt->tensor(n); },
      [&](const std::string& n) { return ckpt->contains(n); });
  m.storage = ckpt;
  return m;
}

}  // namespace qinfer
