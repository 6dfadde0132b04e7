// `qinfer serve` flags spelled as vLLM (and TGI, SGLang) spell them, for concepts qinfer has that its own flag files
// do not already define. Each does what vLLM does or, where qinfer deliberately differs, is accepted with one warning
// line saying what qinfer does instead; values qinfer cannot honour are refused. docs/CLI.md lists them all.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "chat_template/chat_template.h"
#include "cli/model_loading.h"
#include "engine/engine.h"
#include "server/server_options.h"

namespace qinfer::cli {

struct VllmServeFlags {
  std::string model;                       // positional MODEL, as in `vllm serve MODEL`
  std::string dtype = "auto";              // auto | half | float16 | bfloat16 | float | float32
  std::string tokenizer_mode = "auto";     // auto | hf | slow | mistral | custom
  bool trust_remote_code = false;          // nothing remote ever runs
  std::string chat_template;               // a file, or the template itself
  std::string generation_config = "auto";  // auto: the model's | vllm: neutral defaults | DIR
  std::optional<uint64_t> seed;            // seeds the engine's per-request seeds
  int32_t max_logprobs = 20;               // top logprobs per token a request may ask for (-1: no limit)
  int32_t max_input_tokens = 0;            // TGI: longest prompt (0: max_model_len - 1)
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;  // hermes
  std::string uvicorn_log_level;
  std::string metrics_compat = "none";  // none | vllm
};

// Adds the flags to `serve`. Flags that only change server options write them directly.
void add_vllm_serve_flags(CLI::App& serve, VllmServeFlags& flags, server::ServerOptions& server);

// Checks the flags (Error kUnsupported for what qinfer cannot do: other tool-call parsers or
// tokenizer modes; kInvalidArgument for conflicts), logs one warning per flag whose vLLM meaning qinfer does not
// follow, and applies them: the positional model to `model`, --allowed-origins' JSON list and --metrics-compat to
// `server`. Call once, before anything loads.
void apply_vllm_serve_flags(const VllmServeFlags& flags, ModelFlags& model, server::ServerOptions& server);

// --seed, --max-logprobs and --max-input-tokens as engine limits.
void apply_vllm_engine_flags(const VllmServeFlags& flags, EngineOptions& options);

// --chat-template: the named file, else the value itself when it looks like a template, else Error(kNotFound).
// Without the flag: the template of the tokenizer directory.
ChatTemplate load_chat_template(const std::filesystem::path& tokenizer_dir, const std::string& chat_template_flag);

// --generation-config: "auto" keeps the model's generation_config.json defaults, "vllm" the neutral ones
// (temperature 1, no top-k/top-p/min-p), a directory its generation_config.json.
GenerationDefaults generation_defaults(const ModelConfig& config, const std::string& generation_config_flag);

}  // namespace qinfer::cli
