// The `quantization_config` of a checkpoint's config.json: which quantized weight format its linear layers use and
// with which parameters. Formats qinfer loads: AutoAWQ GEMM int4, GPTQ int4 (desc_act false), and block-scaled FP8
// E4M3 (Qwen's / DeepSeek's `quant_method: fp8`). Everything else is refused by name.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace qinfer {

enum class QuantMethod { kNone, kAwq, kGptq, kFp8 };

std::string_view quant_method_name(QuantMethod method);  // "none", "awq", "gptq", "fp8" (vLLM's --quantization)

struct QuantizationConfig {
  QuantMethod method = QuantMethod::kNone;
  int bits = 0;              // AWQ / GPTQ: 4
  int group_size = 0;        // AWQ / GPTQ: input rows sharing one scale and zero: 32, 64 or 128
  bool symmetric = false;    // GPTQ `sym`: every zero point is 8 (checked at load)
  int gptq_zero_offset = 0;  // GPTQ: added to the stored zeros; 1 for checkpoint_format "gptq", 0 for "gptq_v2"
  int block_out = 0;         // FP8: weight_block_size[0], output rows per scale
  int block_in = 0;          // FP8: weight_block_size[1], input columns per scale
  bool online = false;       // FP8 quantized at load from a dense checkpoint (--quantization fp8); not in config.json
  std::vector<std::string> modules_to_not_convert;  // modules_to_not_convert / ignored_layers: they stay dense
  std::vector<std::string> modules_to_convert;      // GPTQ modules_in_block_to_quantize, flattened; empty: all

  bool quantized() const { return method != QuantMethod::kNone; }
  // Whether the linear `module` ("model.layers.0.self_attn.q_proj") is stored quantized. As transformers does, an
  // entry of modules_to_not_convert excludes every module whose name contains it; modules_in_block_to_quantize
  // entries ("self_attn.q_proj") name modules by their suffix.
  bool quantizes(const std::string& module) const;
};

// Parses config.json's `quantization_config` (`file` names config.json in errors). Throws Error(kFormat) for
// malformed fields and Error(kUnsupported) naming the field for what qinfer does not run: another quant_method,
// w_bit, group size, AWQ version or backend, desc_act true, zero_point false, per-tensor or non-128 FP8 blocks,
// static activation scales, e5m2. Fields that only describe calibration are accepted; unknown fields are logged.
QuantizationConfig parse_quantization_config(const nlohmann::json& quantization, const std::filesystem::path& file);

// The `quantization_config` a real checkpoint of this format carries (AutoAWQ, GPTQ v1, Qwen FP8); null for kNone.
nlohmann::json quantization_config_to_json(const QuantizationConfig& config);

// The configurations make-test-model, dummy weights and online FP8 use.
QuantizationConfig awq_quantization(int group_size);
QuantizationConfig gptq_quantization(int group_size);
QuantizationConfig fp8_block_quantization();

}  // namespace qinfer
