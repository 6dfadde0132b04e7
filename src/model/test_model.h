// Deterministic random Qwen3 checkpoints: the same bytes on every machine for a (config, seed) pair. Used by tests,
// benchmarks, the embedded demo model and `--load-format dummy`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/qwen3_weights.h"

namespace qinfer {

class ProgressReporter;
class ThreadPool;

// Presets: "tiny" (tied, head_dim 128, GQA 4:1, q width 2x hidden), "tiny-untied" (untied, head_dim 64, GQA 3:1,
// other theta and eps), "0.6b-shape", "4b-shape" (Qwen3-4B-Instruct-2507), "8b-shape". Throws kInvalidArgument.
ModelConfig test_model_preset(const std::string& name);
std::vector<std::string> test_model_preset_names();

// How one tensor's values are drawn: uniform in [-bound, bound], plus `offset` (1 for norm weights).
struct TestTensorInit {
  float bound = 0;
  float offset = 0;
};
TestTensorInit test_tensor_init(const std::string& name, const std::vector<int64_t>& shape, const ModelConfig& config);

// Key of a tensor's random stream; element i of the tensor is test_tensor_value(key, i, init) rounded to bf16.
uint64_t test_tensor_key(const std::string& name, uint64_t seed);

// Counter-based (splitmix64), pure integer arithmetic plus one float multiply-add: bit-identical everywhere,
// including the CUDA generator that mirrors it.
inline float test_tensor_value(uint64_t key, uint64_t index, TestTensorInit init) {
  uint64_t z = key + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  int32_t centered = static_cast<int32_t>(z >> 40) - (1 << 23);  // uniform in [-2^23, 2^23)
  float scale = init.bound * 0x1p-23f;                           // power-of-two scaling: exact
  return static_cast<float>(centered) * scale + init.offset;
}

// Fills `out` with bf16 bits of the named tensor.
void generate_test_tensor(const std::string& name, const std::vector<int64_t>& shape, const ModelConfig& config,
                          uint64_t seed, std::span<uint16_t> out, ThreadPool* pool);

// Writes config.json, generation_config.json and model.safetensors (bf16) into `dir`; copies tokenizer.json,
// tokenizer_config.json (and chat_template.jinja) from `tokenizer_dir` when given.
void write_test_model(const std::filesystem::path& dir, const ModelConfig& config, uint64_t seed,
                      const std::optional<std::filesystem::path>& tokenizer_dir, ThreadPool* pool);

// The same weights generated in memory, for `--load-format dummy` on the CPU; `progress`, when given, advances by
// each tensor's bytes.
LoadedModel make_dummy_model(const ModelConfig& config, uint64_t seed, ThreadPool* pool,
                             ProgressReporter* progress = nullptr);

}  // namespace qinfer
