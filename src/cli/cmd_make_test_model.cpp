// qinfer make-test-model: writes a deterministic random Qwen3 checkpoint.
#include <cstdio>
#include <optional>

#include "cli/commands.h"
#include "model/config.h"
#include "model/test_model.h"
#include "util/json_file.h"
#include "util/logging.h"
#include "util/thread_pool.h"

namespace qinfer::cli {

void register_make_test_model(CLI::App& app) {
  struct Flags {
    std::string out, preset = "tiny", config, tokenizer_dir, quantization;
    uint64_t seed = 0;
    int threads = 0, group_size = 128;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "make-test-model", "Write a deterministic random Qwen3 checkpoint (bf16, or quantized from the bf16 weights)");
  cmd->add_option("--out", flags->out, "Output directory")->required();
  cmd->add_option("--preset", flags->preset, "tiny | tiny-untied | 0.6b-shape | 4b-shape | 8b-shape")
      ->capture_default_str();
  cmd->add_option("--config", flags->config, "A config.json to use instead of a preset");
  cmd->add_option("--seed", flags->seed, "Random seed; same seed, same bytes on every machine")->capture_default_str();
  cmd->add_option("--tokenizer-dir", flags->tokenizer_dir, "Copy tokenizer.json / tokenizer_config.json from here");
  cmd->add_option("--threads", flags->threads, "Worker threads (0: all cores)");
  cmd->add_option("--quantization", flags->quantization,
                  "Write the linears as AutoAWQ GEMM int4 (awq), GPTQ int4 symmetric (gptq) or 128x128 block FP8 "
                  "(fp8), quantized from the random bf16 weights, with the quantization_config such checkpoints have")
      ->check(CLI::IsMember({"awq", "gptq", "fp8"}));
  cmd->add_option("--group-size", flags->group_size, "With --quantization awq | gptq: input rows per scale")
      ->check(CLI::IsMember({32, 64, 128}))
      ->capture_default_str();
  cmd->callback([flags] {
    ModelConfig config;
    if (!flags->config.empty()) {
      nlohmann::json j = read_json_file(flags->config);
      config = parse_model_config(j, flags->config);
    } else {
      config = test_model_preset(flags->preset);
    }
    if (flags->quantization == "awq")
      config.quantization = awq_quantization(flags->group_size);
    else if (flags->quantization == "gptq")
      config.quantization = gptq_quantization(flags->group_size);
    else if (flags->quantization == "fp8")
      config.quantization = fp8_block_quantization();
    std::optional<std::filesystem::path> tokenizer;
    if (!flags->tokenizer_dir.empty()) tokenizer = flags->tokenizer_dir;
    ThreadPool pool(flags->threads);
    spdlog::info("writing {} ({:.2f} B parameters, seed {}) to {}",
                 flags->config.empty() ? flags->preset : flags->config,
                 static_cast<double>(config.num_parameters()) / 1e9, flags->seed, flags->out);
    write_test_model(flags->out, config, flags->seed, tokenizer, &pool);
  });
}

}  // namespace qinfer::cli
