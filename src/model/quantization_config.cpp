#include "model/quantization_config.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "util/error.h"
#include "util/json_file.h"
#include "util/logging.h"

namespace qinfer {

std::string_view quant_method_name(QuantMethod method) {
  switch (method) {
    case QuantMethod::kNone:
      return "none";
    case QuantMethod::kAwq:
      return "awq";
    case QuantMethod::kGptq:
      return "gptq";
    case QuantMethod::kFp8:
      return "fp8";
  }
  return "?";
}

bool QuantizationConfig::quantizes(const std::string& module) const {
  if (method == QuantMethod::kNone) return false;
  for (const std::string& entry : modules_to_not_convert)
    if (module.find(entry) != std::string::npos) return false;
  if (modules_to_convert.empty()) return true;
  return std::any_of(modules_to_convert.begin(), modules_to_convert.end(), [&](const std::string& suffix) {
    return module.size() > suffix.size() && module.compare(module.size() - suffix.size(), suffix.size(), suffix) == 0 &&
           module[module.size() - suffix.size() - 1] == '.';
  });
}

namespace {

class FieldReader {
 public:
  FieldReader(const nlohmann::json& j, const std::filesystem::path& file) : j_(j), file_(file) {}

  std::string where(const std::string& field) const { return file_.string() + ": quantization_config." + field; }
  const std::filesystem::path& file() const { return file_; }
  [[noreturn]] void unsupported(const std::string& field, const std::string& what) const {
    throw Error(ErrorKind::kUnsupported, where(field) + " " + what);
  }
  [[noreturn]] void malformed(const std::string& field, const std::string& what) const {
    throw Error(ErrorKind::kFormat, where(field) + " " + what);
  }

  bool has(const std::string& field) {
    seen_.insert(field);
    return j_.contains(field) && !j_[field].is_null();
  }
  // The first of `names` present (aliases such as AutoAWQ's w_bit for bits); "" when none is.
  std::string first_present(std::initializer_list<const char*> names) {
    std::string found;
    for (const char* name : names)
      if (has(name) && found.empty()) found = name;
    return found;
  }
  template <typename T>
  T get(std::initializer_list<const char*> names, const std::string& what) {
    std::string name = first_present(names);
    if (name.empty()) malformed(*names.begin(), "is missing (" + what + ")");
    return json_field<T>(j_, name, file_);
  }
  template <typename T>
  T get_or(std::initializer_list<const char*> names, const T& fallback) {
    std::string name = first_present(names);
    return name.empty() ? fallback : json_field<T>(j_, name, file_);
  }
  std::vector<std::string> strings(const std::string& field) {
    std::vector<std::string> out;
    if (!has(field)) return out;
    if (!j_[field].is_array()) malformed(field, "must be a list of module names or null");
    for (const auto& v : j_[field]) {
      if (!v.is_string()) malformed(field, "must hold only strings");
      out.push_back(v.get<std::string>());
    }
    return out;
  }
  // Fields that only describe calibration or Python-side kernel choices: accepted as they do not change the weights'
  // meaning. Anything else unknown is logged, so that nothing is dropped without a word.
  void accept(std::initializer_list<const char*> names) {
    for (const char* name : names) seen_.insert(name);
  }
  void log_unknown() const {
    for (const auto& [key, value] : j_.items())
      if (!seen_.count(key))
        spdlog::warn("{}: quantization_config.{} is not known to qinfer and has no effect", file_.string(), key);
  }
  const nlohmann::json& json() const { return j_; }

 private:
  const nlohmann::json& j_;
  const std::filesystem::path& file_;
  std::set<std::string> seen_;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

void read_int4_grouping(FieldReader& r, QuantizationConfig& q) {
  q.bits = r.get<int>({"bits", "w_bit"}, "the weight bit width");
  if (q.bits != 4) r.unsupported("bits", "= " + std::to_string(q.bits) + " is not supported (4-bit only)");
  q.group_size = r.get<int>({"group_size", "q_group_size"}, "input rows per scale");
  if (q.group_size != 32 && q.group_size != 64 && q.group_size != 128)
    r.unsupported("group_size", "= " + std::to_string(q.group_size) + " is not supported (32, 64 or 128" +
                                    (q.group_size == -1 ? "; -1, one group per column, is not" : "") + ")");
}

void parse_awq(FieldReader& r, QuantizationConfig& q) {
  read_int4_grouping(r, q);
  if (!r.get_or<bool>({"zero_point"}, true))
    r.unsupported("zero_point", "= false is not supported (AutoAWQ GEMM with zero points only)");
  std::string version = lower(r.get_or<std::string>({"version"}, "gemm"));
  if (version != "gemm")
    r.unsupported("version", "'" + version + "' is not supported: qinfer loads AutoAWQ's GEMM packing only (" +
                                 "gemv, gemv_fast, exllama, marlin and ipex pack the int4 weights differently)");
  std::string backend = lower(r.get_or<std::string>({"backend"}, "autoawq"));
  if (backend != "autoawq") r.unsupported("backend", "'" + backend + "' is not supported (autoawq checkpoints only)");
  q.modules_to_not_convert = r.strings("modules_to_not_convert");
  r.accept({"do_fuse", "fuse_max_seq_len", "modules_to_fuse", "exllama_config"});
}

void parse_gptq(FieldReader& r, QuantizationConfig& q) {
  read_int4_grouping(r, q);
  if (r.get_or<bool>({"desc_act"}, false))
    r.unsupported("desc_act", "= true is not supported (act-order reorders the input rows through g_idx)");
  q.symmetric = r.get_or<bool>({"sym"}, true);
  std::string format = lower(r.get_or<std::string>({"checkpoint_format", "format"}, "gptq"));
  if (format == "gptq")
    q.gptq_zero_offset = 1;  // AutoGPTQ / GPTQModel v1: zeros stored minus one
  else if (format == "gptq_v2")
    q.gptq_zero_offset = 0;
  else
    r.unsupported("checkpoint_format", "'" + format + "' is not supported (gptq or gptq_v2)");
  if (r.get_or<bool>({"lm_head"}, false)) r.unsupported("lm_head", "= true is not supported (lm_head stays dense)");
  if (r.has("dynamic") && !(r.json()["dynamic"].is_object() && r.json()["dynamic"].empty()))
    r.unsupported("dynamic", "(per-module overrides) is not supported");
  std::string pack = lower(r.get_or<std::string>({"pack_dtype"}, "int32"));
  if (pack != "int32") r.unsupported("pack_dtype", "'" + pack + "' is not supported (int32)");
  q.modules_to_not_convert = r.strings("modules_to_not_convert");
  if (r.has("modules_in_block_to_quantize")) {
    const auto& groups = r.json()["modules_in_block_to_quantize"];
    if (!groups.is_array()) r.malformed("modules_in_block_to_quantize", "must be a list of lists of module names");
    for (const auto& group : groups) {
      if (!group.is_array()) r.malformed("modules_in_block_to_quantize", "must be a list of lists of module names");
      for (const auto& name : group) {
        if (!name.is_string()) r.malformed("modules_in_block_to_quantize", "must hold only strings");
        q.modules_to_convert.push_back(name.get<std::string>());
      }
    }
  }
  r.accept({"damp_percent",
            "damp_auto_increment",
            "dataset",
            "true_sequential",
            "static_groups",
            "use_exllama",
            "exllama_config",
            "max_input_length",
            "use_cuda_fp16",
            "model_seqlen",
            "block_name_to_quantize",
            "module_name_preceding_first_block",
            "batch_size",
            "pad_token_id",
            "cache_block_outputs",
            "tokenizer",
            "meta",
            "model_name_or_path",
            "model_file_base_name",
            "quantizer",
            "backend",
            "mse",
            "v2",
            "v2_alpha",
            "hyb_act",
            "act_group_aware"});
}

void parse_fp8(FieldReader& r, QuantizationConfig& q) {
  std::string fmt = lower(r.get_or<std::string>({"fmt"}, "e4m3"));
  if (fmt != "e4m3") r.unsupported("fmt", "'" + fmt + "' is not supported (e4m3 only)");
  std::string scheme = lower(r.get_or<std::string>({"activation_scheme"}, "dynamic"));
  if (scheme != "dynamic")
    r.unsupported("activation_scheme",
                  "'" + scheme + "' is not supported (dynamic: activations quantized per token at run time)");
  if (!r.has("weight_block_size"))
    r.unsupported("weight_block_size", "is missing: per-tensor FP8 is not supported (block-scaled [128, 128] only)");
  const auto& block = r.json()["weight_block_size"];
  if (!block.is_array() || block.size() != 2 || !block[0].is_number_integer() || !block[1].is_number_integer())
    r.malformed("weight_block_size", "must be a list of two integers, got " + block.dump());
  q.block_out = json_integer<int32_t>(block[0], "quantization_config.weight_block_size", r.file());
  q.block_in = json_integer<int32_t>(block[1], "quantization_config.weight_block_size", r.file());
  if (q.block_out != 128 || q.block_in != 128)
    r.unsupported("weight_block_size", block.dump() + " is not supported ([128, 128] only)");
  std::string scale_fmt = lower(r.get_or<std::string>({"scale_fmt"}, "float"));
  if (scale_fmt != "float") r.unsupported("scale_fmt", "'" + scale_fmt + "' is not supported (float scales only)");
  q.modules_to_not_convert = r.strings("modules_to_not_convert");
  for (std::string& m : r.strings("ignored_layers")) q.modules_to_not_convert.push_back(std::move(m));
  r.accept({"dequantize"});
}

nlohmann::json fields_to_json(const QuantizationConfig& q) {
  switch (q.method) {
    case QuantMethod::kNone:
      return nullptr;
    case QuantMethod::kAwq:
      return {{"quant_method", "awq"},
              {"bits", q.bits},
              {"group_size", q.group_size},
              {"zero_point", true},
              {"version", "gemm"}};
    case QuantMethod::kGptq:
      return {{"quant_method", "gptq"},     {"bits", q.bits},
              {"group_size", q.group_size}, {"desc_act", false},
              {"sym", q.symmetric},         {"checkpoint_format", q.gptq_zero_offset == 1 ? "gptq" : "gptq_v2"},
              {"static_groups", false},     {"true_sequential", true},
              {"damp_percent", 0.01}};
    case QuantMethod::kFp8:
      return {{"quant_method", "fp8"},
              {"fmt", "e4m3"},
              {"activation_scheme", "dynamic"},
              {"weight_block_size", {q.block_out, q.block_in}}};
  }
  return nullptr;
}

}  // namespace

QuantizationConfig parse_quantization_config(const nlohmann::json& j, const std::filesystem::path& file) {
  QuantizationConfig q;
  if (j.is_null()) return q;
  if (!j.is_object()) throw Error(ErrorKind::kFormat, file.string() + ": quantization_config must be an object");
  FieldReader r(j, file);
  std::string method = lower(r.get<std::string>({"quant_method"}, "the quantization format"));
  if (method == "awq") {
    q.method = QuantMethod::kAwq;
    parse_awq(r, q);
  } else if (method == "gptq") {
    q.method = QuantMethod::kGptq;
    parse_gptq(r, q);
  } else if (method == "fp8") {
    q.method = QuantMethod::kFp8;
    parse_fp8(r, q);
  } else {
    r.unsupported("quant_method", "'" + method + "' is not supported (qinfer loads awq, gptq and fp8 checkpoints)");
  }
  r.log_unknown();
  return q;
}

nlohmann::json quantization_config_to_json(const QuantizationConfig& q) {
  nlohmann::json j = fields_to_json(q);
  if (!j.is_null())
    j["modules_to_not_convert"] =
        q.modules_to_not_convert.empty() ? nlohmann::json(nullptr) : nlohmann::json(q.modules_to_not_convert);
  return j;
}

namespace {

QuantizationConfig with_method(QuantMethod method, int bits, int group_size) {
  QuantizationConfig q;
  q.method = method;
  q.bits = bits;
  q.group_size = group_size;
  return q;
}

}  // namespace

QuantizationConfig awq_quantization(int group_size) { return with_method(QuantMethod::kAwq, 4, group_size); }

QuantizationConfig gptq_quantization(int group_size) {
  QuantizationConfig q = with_method(QuantMethod::kGptq, 4, group_size);
  q.symmetric = true;
  q.gptq_zero_offset = 1;
  return q;
}

QuantizationConfig fp8_block_quantization() {
  QuantizationConfig q = with_method(QuantMethod::kFp8, 0, 0);
  q.block_out = 128;
  q.block_in = 128;
  return q;
}

}  // namespace qinfer
