#include "model/qwen3_weights.h"

#include <set>

#include "util/error.h"
#include "util/logging.h"

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

std::vector<std::pair<std::string, LinearWeight*>> layer_linears(Qwen3LayerWeights& lw, int layer_index) {
  const std::string p = "model.layers." + std::to_string(layer_index) + ".";
  return {{p + "self_attn.q_proj", &lw.q_proj}, {p + "self_attn.k_proj", &lw.k_proj},
          {p + "self_attn.v_proj", &lw.v_proj}, {p + "self_attn.o_proj", &lw.o_proj},
          {p + "mlp.gate_proj", &lw.gate_proj}, {p + "mlp.up_proj", &lw.up_proj},
          {p + "mlp.down_proj", &lw.down_proj}};
}

bool has_quantized_linears(const Qwen3Weights& w) {
  for (const Qwen3LayerWeights& l : w.layers)
    for (const LinearWeight* lin : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj})
      if (lin->format() != WeightFormat::kDense) return true;
  return false;
}

namespace {

// Every tensor name the binding read, so that what is left over can be reported.
class UsedTensors {
 public:
  explicit UsedTensors(const TensorSource& source) : source_(source) {
    tracked_.description = source.description;
    tracked_.contains = source.contains;
    tracked_.names = source.names;
    tracked_.tensor = [this](const std::string& name) {
      used_.insert(name);
      return source_.tensor(name);
    };
  }
  const TensorSource& source() const { return tracked_; }

  // A `.bias` would change the output: refused. Other leftovers (an exporter's extra buffers) are logged.
  void check_leftovers() const {
    std::vector<std::string> unused;
    for (const std::string& name : source_.names())
      if (!used_.count(name)) unused.push_back(name);
    for (const std::string& name : unused)
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0)
        throw Error(ErrorKind::kUnsupported, source_.description + ": tensor '" + name +
                                                 "' is a bias; Qwen3 has none and qinfer does not add biases");
    if (!unused.empty())
      spdlog::warn("{}: {} tensor(s) are not part of the Qwen3 layout and are not used (first: '{}')",
                   source_.description, unused.size(), unused.front());
  }

 private:
  const TensorSource& source_;
  TensorSource tracked_;
  std::set<std::string> used_;
};

}  // namespace

Qwen3Weights bind_qwen3_weights(const ModelConfig& c, const TensorSource& raw_source) {
  UsedTensors used(raw_source);
  const TensorSource& source = used.source();
  std::optional<DType> dtype;
  auto get = [&](const std::string& name, const std::vector<int64_t>& shape) {
    TensorView t = source.tensor(name);
    if (!dtype_is_float(t.dtype))
      throw Error(ErrorKind::kFormat,
                  t.file.string() + ": tensor '" + name + "' is " + std::string(dtype_name(t.dtype)) +
                      ", expected a BF16, F16 or F32 tensor" +
                      (c.quantization.quantized()
                           ? std::string(" (quantization_config leaves it dense)")
                           : std::string(" (config.json has no quantization_config; quantized checkpoints need one)")));
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
  auto linear = [&](const std::string& module, int64_t out, int64_t in) {
    return bind_linear(source, module, out, in, c.quantization, get);
  };
  Qwen3Weights w;
  w.embed_tokens = get("model.embed_tokens.weight", {c.vocab_size, h});
  for (int l = 0; l < c.num_layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    Qwen3LayerWeights lw;
    lw.input_norm = get(p + "input_layernorm.weight", {h});
    lw.q_proj = linear(p + "self_attn.q_proj", q, h);
    lw.k_proj = linear(p + "self_attn.k_proj", kv, h);
    lw.v_proj = linear(p + "self_attn.v_proj", kv, h);
    lw.q_norm = get(p + "self_attn.q_norm.weight", {d});
    lw.k_norm = get(p + "self_attn.k_norm.weight", {d});
    lw.o_proj = linear(p + "self_attn.o_proj", h, q);
    lw.post_attn_norm = get(p + "post_attention_layernorm.weight", {h});
    lw.gate_proj = linear(p + "mlp.gate_proj", ff, h);
    lw.up_proj = linear(p + "mlp.up_proj", ff, h);
    lw.down_proj = linear(p + "mlp.down_proj", h, ff);
    w.layers.push_back(std::move(lw));
  }
  w.final_norm = get("model.norm.weight", {h});
  // Tied checkpoints usually omit lm_head; some carry a copy, which we then use.
  if (!c.tie_word_embeddings || source.contains("lm_head.weight"))
    w.lm_head = get("lm_head.weight", {c.vocab_size, h});
  else
    w.lm_head = w.embed_tokens;
  used.check_leftovers();
  return w;
}

LoadedModel load_model(const std::filesystem::path& model_dir) {
  if (!std::filesystem::is_directory(model_dir))
    throw Error(ErrorKind::kNotFound, "model directory " + model_dir.string() + " does not exist");
  LoadedModel m;
  m.config = load_model_config(model_dir);
  auto ckpt = std::make_shared<Checkpoint>(Checkpoint::open(model_dir));
  TensorSource source{model_dir.string(), [&](const std::string& n) { return ckpt->tensor(n); },
                      [&](const std::string& n) { return ckpt->contains(n); }, [&] { return ckpt->tensor_names(); }};
  m.weights = bind_qwen3_weights(m.config, source);
  m.storage = ckpt;
  return m;
}

}  // namespace qinfer
