#include "model/config.h"

#include <cmath>
#include <cstdint>

#include "util/error.h"
#include "util/json_file.h"

namespace qinfer {

int64_t ModelConfig::num_parameters() const {
  int64_t h = hidden_size, per_layer = 0;
  per_layer += h * q_width() + 2 * h * kv_width() + static_cast<int64_t>(q_width()) * h;  // q, k, v, o
  per_layer += 3 * h * intermediate_size;                                                 // gate, up, down
  per_layer += 2 * h + 2 * head_dim;                                                      // norms
  int64_t embeddings = static_cast<int64_t>(vocab_size) * h * (tie_word_embeddings ? 1 : 2);
  return per_layer * num_layers + embeddings + h;
}

namespace {

std::vector<int32_t> int_or_list(const nlohmann::json& j, const std::string& field, const std::filesystem::path& file) {
  std::vector<int32_t> out;
  if (!j.contains(field) || j[field].is_null()) return out;
  const auto& v = j[field];
  if (v.is_number_integer()) {
    out.push_back(json_integer<int32_t>(v, field, file));
  } else if (v.is_array()) {
    for (const auto& x : v) {
      if (!x.is_number_integer())
        throw Error(ErrorKind::kFormat, file.string() + ": field '" + field + "' must hold integers");
      out.push_back(json_integer<int32_t>(x, field, file));
    }
  } else {
    throw Error(ErrorKind::kFormat, file.string() + ": field '" + field + "' expected an integer or a list");
  }
  return out;
}

[[noreturn]] void out_of_range(const std::filesystem::path& file, const std::string& field, const std::string& expected,
                               const std::string& actual) {
  throw Error(ErrorKind::kFormat, file.string() + ": field '" + field + "' must be " + expected + ", got " + actual);
}

// A number as a config file would spell it: "0", "100", "1e-06", "0.7"; "inf" for an infinity, which JSON text cannot
// hold but a config built in code can.
std::string number_text(double value) {
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : value > 0 ? "inf" : "-inf";
  if (value == std::trunc(value) && std::abs(value) < 1e15) return std::to_string(static_cast<int64_t>(value));
  return nlohmann::json(value).dump();
}

void require_positive(int value, const std::string& field, const std::filesystem::path& file) {
  if (value <= 0) out_of_range(file, field, "positive", std::to_string(value));
}

void require_positive_finite(double value, const std::string& field, const std::filesystem::path& file) {
  if (!(std::isfinite(value) && value > 0)) out_of_range(file, field, "positive and finite", number_text(value));
}

// Within [min, max]; `open_min` excludes min. NaN is never in range.
void require_in(double value, double min, double max, bool open_min, const std::string& field,
                const std::filesystem::path& file) {
  if (!((open_min ? value > min : value >= min) && value <= max))
    out_of_range(file, field,
                 "in " + std::string(open_min ? "(" : "[") + number_text(min) + ", " + number_text(max) + "]",
                 number_text(value));
}

// The numeric parameters of a rope_scaling / rope_parameters object: whatever its type, a factor that is not a positive
// finite number makes the file malformed (checked before the type is refused as unsupported).
void check_rope_numbers(const nlohmann::json& rope, const std::string& object, const std::filesystem::path& file) {
  for (const char* name :
       {"factor", "rope_theta", "attention_factor", "beta_fast", "beta_slow", "low_freq_factor", "high_freq_factor"})
    if (rope.contains(name) && !rope[name].is_null())
      require_positive_finite(json_field<double>(rope, name, file), object + "." + name, file);
  if (rope.contains("original_max_position_embeddings") && !rope["original_max_position_embeddings"].is_null())
    require_positive(json_field<int>(rope, "original_max_position_embeddings", file),
                     object + ".original_max_position_embeddings", file);
}

// The sampling defaults of generation_config.json, in the ranges the sampler accepts for a request: a default outside
// them would make every request that relies on it fail.
void parse_generation_defaults(const nlohmann::json& gen, const std::filesystem::path& file, int vocab_size,
                               GenerationDefaults& g) {
  g.temperature = json_field_or<double>(gen, "temperature", g.temperature, file);
  require_in(g.temperature, 0, 100, false, "temperature", file);
  g.top_p = json_field_or<double>(gen, "top_p", g.top_p, file);
  require_in(g.top_p, 0, 1, true, "top_p", file);
  g.top_k = json_field_or<int>(gen, "top_k", g.top_k, file);
  if (g.top_k < -1 || g.top_k > vocab_size)
    out_of_range(file, "top_k", "-1, 0 or in [1, " + std::to_string(vocab_size) + "] (vocab_size)",
                 std::to_string(g.top_k));
  g.min_p = json_field_or<double>(gen, "min_p", g.min_p, file);
  require_in(g.min_p, 0, 1, false, "min_p", file);
  g.repetition_penalty = json_field_or<double>(gen, "repetition_penalty", g.repetition_penalty, file);
  require_in(g.repetition_penalty, 0, 10, true, "repetition_penalty", file);
  if (!json_field_or<bool>(gen, "do_sample", true, file)) g.temperature = 0.0;
}

void check_token_ids(const std::vector<int32_t>& ids, const std::string& field, int vocab_size,
                     const std::filesystem::path& file) {
  for (int32_t id : ids)
    if (id < 0 || id >= vocab_size)
      out_of_range(file, field, "a token id in [0, " + std::to_string(vocab_size) + ") (vocab_size)",
                   std::to_string(id));
}

}  // namespace

ModelConfig parse_model_config(const nlohmann::json& j, const std::filesystem::path& path, const nlohmann::json* gen,
                               const std::filesystem::path& gen_path) {
  if (!j.is_object()) throw Error(ErrorKind::kFormat, path.string() + ": expected a JSON object");
  ModelConfig c;
  std::string model_type = json_field_or<std::string>(j, "model_type", "", path);
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    c.architecture = j["architectures"][0].get<std::string>();
  if (c.architecture != "Qwen3ForCausalLM" && model_type != "qwen3")
    throw Error(ErrorKind::kUnsupported, path.string() + ": architecture '" + c.architecture + "' (model_type '" +
                                             model_type +
                                             "') is not supported; qinfer runs Qwen3ForCausalLM (dense Qwen3)");
  if (c.architecture.empty()) c.architecture = "Qwen3ForCausalLM";
  c.hidden_size = json_field<int>(j, "hidden_size", path);
  c.intermediate_size = json_field<int>(j, "intermediate_size", path);
  c.num_layers = json_field<int>(j, "num_hidden_layers", path);
  c.num_heads = json_field<int>(j, "num_attention_heads", path);
  c.num_kv_heads = json_field_or<int>(j, "num_key_value_heads", c.num_heads, path);
  c.vocab_size = json_field<int>(j, "vocab_size", path);
  for (auto [v, name] : {std::pair{c.hidden_size, "hidden_size"},
                         {c.intermediate_size, "intermediate_size"},
                         {c.num_layers, "num_hidden_layers"},
                         {c.num_heads, "num_attention_heads"},
                         {c.num_kv_heads, "num_key_value_heads"},
                         {c.vocab_size, "vocab_size"}})
    require_positive(v, name, path);
  c.head_dim = json_field_or<int>(j, "head_dim", c.hidden_size / c.num_heads, path);
  require_positive(c.head_dim, "head_dim", path);
  if (c.head_dim % 2 != 0) out_of_range(path, "head_dim", "even for RoPE", std::to_string(c.head_dim));
  // Widths are int everywhere downstream (q_width(), tensor shapes); a product past int32 would wrap.
  if (static_cast<int64_t>(c.num_heads) * c.head_dim > INT32_MAX)
    out_of_range(path, "head_dim",
                 "at most " + std::to_string(INT32_MAX / c.num_heads) + " with " + std::to_string(c.num_heads) +
                     " attention heads (a q width within int32)",
                 std::to_string(c.head_dim));
  if (c.num_heads % c.num_kv_heads != 0)
    throw Error(ErrorKind::kFormat, path.string() + ": num_attention_heads (" + std::to_string(c.num_heads) +
                                        ") must be a multiple of num_key_value_heads (" +
                                        std::to_string(c.num_kv_heads) + ")");
  c.rms_norm_eps = json_field_or<double>(j, "rms_norm_eps", 1e-6, path);
  require_positive_finite(c.rms_norm_eps, "rms_norm_eps", path);
  c.rope_theta = json_field_or<double>(j, "rope_theta", 1e6, path);
  require_positive_finite(c.rope_theta, "rope_theta", path);
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const auto& rp = j["rope_parameters"];
    check_rope_numbers(rp, "rope_parameters", path);
    c.rope_theta = json_field_or<double>(rp, "rope_theta", c.rope_theta, path);
    std::string type = json_field_or<std::string>(rp, "rope_type", "default", path);
    if (type != "default")
      throw Error(ErrorKind::kUnsupported,
                  path.string() + ": rope_parameters.rope_type '" + type + "' is not supported (only default RoPE)");
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const auto& rs = j["rope_scaling"];
    if (rs.is_object()) check_rope_numbers(rs, "rope_scaling", path);
    std::string type = rs.is_object() ? json_field_or<std::string>(
                                            rs, "rope_type", json_field_or<std::string>(rs, "type", "?", path), path)
                                      : "?";
    if (type != "default")
      throw Error(ErrorKind::kUnsupported,
                  path.string() + ": rope_scaling type '" + type + "' is not supported (only default RoPE)");
  }
  if (json_field_or<bool>(j, "use_sliding_window", false, path))
    throw Error(ErrorKind::kUnsupported, path.string() + ": use_sliding_window=true is not supported");
  if (json_field_or<bool>(j, "attention_bias", false, path))
    throw Error(ErrorKind::kUnsupported, path.string() + ": attention_bias=true is not supported (Qwen3 has none)");
  std::string act = json_field_or<std::string>(j, "hidden_act", "silu", path);
  if (act != "silu")
    throw Error(ErrorKind::kUnsupported, path.string() + ": hidden_act '" + act + "' is not supported (silu only)");
  c.max_position_embeddings = json_field_or<int64_t>(j, "max_position_embeddings", 32768, path);
  if (c.max_position_embeddings < 1 || c.max_position_embeddings > INT32_MAX)
    out_of_range(path, "max_position_embeddings", "in [1, " + std::to_string(INT32_MAX) + "]",
                 std::to_string(c.max_position_embeddings));
  c.tie_word_embeddings = json_field_or<bool>(j, "tie_word_embeddings", false, path);
  std::string dtype =
      json_field_or<std::string>(j, "torch_dtype", json_field_or<std::string>(j, "dtype", "bfloat16", path), path);
  if (dtype == "bfloat16")
    c.dtype = DType::kBF16;
  else if (dtype == "float16")
    c.dtype = DType::kF16;
  else if (dtype == "float32")
    c.dtype = DType::kF32;
  else
    throw Error(ErrorKind::kUnsupported,
                path.string() + ": torch_dtype '" + dtype + "' is not supported (bfloat16, float16, float32)");
  if (j.contains("quantization_config")) c.quantization = parse_quantization_config(j["quantization_config"], path);
  c.eos_token_ids = int_or_list(j, "eos_token_id", path);
  check_token_ids(c.eos_token_ids, "eos_token_id", c.vocab_size, path);
  c.bos_token_ids = int_or_list(j, "bos_token_id", path);
  if (gen) {
    if (!gen->is_object()) throw Error(ErrorKind::kFormat, gen_path.string() + ": expected a JSON object");
    auto gen_eos = int_or_list(*gen, "eos_token_id", gen_path);
    check_token_ids(gen_eos, "eos_token_id", c.vocab_size, gen_path);
    if (!gen_eos.empty()) c.eos_token_ids = gen_eos;
    parse_generation_defaults(*gen, gen_path, c.vocab_size, c.generation);
  }
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& model_dir) {
  auto config_path = model_dir / "config.json";
  nlohmann::json config = read_json_file(config_path);
  auto gen_path = model_dir / "generation_config.json";
  if (std::filesystem::exists(gen_path)) {
    nlohmann::json gen = read_json_file(gen_path);
    return parse_model_config(config, config_path, &gen, gen_path);
  }
  return parse_model_config(config, config_path);
}

nlohmann::json model_config_to_json(const ModelConfig& c) {
  const char* dtype = c.dtype == DType::kBF16 ? "bfloat16" : c.dtype == DType::kF16 ? "float16" : "float32";
  nlohmann::json j = {
      {"architectures", {c.architecture}},
      {"model_type", "qwen3"},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", nullptr},
      {"max_position_embeddings", c.max_position_embeddings},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"torch_dtype", dtype},
      {"hidden_act", "silu"},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"use_sliding_window", false},
      {"use_cache", true},
  };
  if (c.quantization.quantized() && !c.quantization.online)
    j["quantization_config"] = quantization_config_to_json(c.quantization);
  if (!c.bos_token_ids.empty()) j["bos_token_id"] = c.bos_token_ids.front();
  if (!c.eos_token_ids.empty()) j["eos_token_id"] = c.eos_token_ids.front();
  return j;
}

nlohmann::json generation_config_to_json(const ModelConfig& c) {
  const auto& g = c.generation;
  return {{"eos_token_id", c.eos_token_ids},
          {"do_sample", g.temperature > 0},
          {"temperature", g.temperature},
          {"top_p", g.top_p},
          {"top_k", g.top_k},
          {"min_p", g.min_p}};
}

}  // namespace qinfer
