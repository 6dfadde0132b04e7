#include "cli/vllm_serve_flags.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/model_path.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/logging.h"

namespace qinfer::cli {
namespace {

[[noreturn]] void unsupported(const std::string& message) { throw Error(ErrorKind::kUnsupported, message); }
[[noreturn]] void invalid(const std::string& message) { throw Error(ErrorKind::kInvalidArgument, message); }

// --allowed-origins takes vLLM's JSON list ('["https://a.example", "*"]') as well as plain origins, one per flag or
// comma-separated. CLI11 already splits a bracketed list into its entries but keeps each entry's JSON quotes, which
// are removed here.
std::vector<std::string> expand_origin_lists(const std::vector<std::string>& values) {
  std::vector<std::string> origins;
  for (const std::string& raw : values) {
    const size_t first = raw.find_first_not_of(' '), last = raw.find_last_not_of(' ');
    const std::string value = first == std::string::npos ? "" : raw.substr(first, last - first + 1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      const nlohmann::json origin = nlohmann::json::parse(value, nullptr, false);
      if (!origin.is_string()) invalid("--allowed-origins " + raw + ": not a JSON string");
      origins.push_back(origin.get<std::string>());
      continue;
    }
    if (value.empty() || value.front() != '[') {
      for (size_t start = 0; start <= value.size();) {
        const size_t comma = std::min(value.find(',', start), value.size());
        const std::string origin = value.substr(start, comma - start);
        const size_t from = origin.find_first_not_of(' '), to = origin.find_last_not_of(' ');
        if (from != std::string::npos) origins.push_back(origin.substr(from, to - from + 1));
        start = comma + 1;
      }
      continue;
    }
    const nlohmann::json list = nlohmann::json::parse(value, nullptr, false);
    if (!list.is_array())
      invalid("--allowed-origins " + value + ": not a JSON list; expected e.g. '[\"*\"]' or an origin");
    for (const nlohmann::json& origin : list) {
      if (!origin.is_string()) invalid("--allowed-origins " + value + ": every entry must be a string");
      origins.push_back(origin.get<std::string>());
    }
  }
  return origins;
}

void check_values(const VllmServeFlags& f) {
  if (f.tokenizer_mode == "mistral" || f.tokenizer_mode == "custom")
    unsupported("--tokenizer-mode " + f.tokenizer_mode +
                ": qinfer has one tokenizer, its own byte-level BPE for tokenizer.json (--tokenizer-mode auto)");
  if (!f.tool_call_parser.empty() && f.tool_call_parser != "hermes")
    unsupported("--tool-call-parser " + f.tool_call_parser +
                ": qinfer parses the Hermes/Qwen3 format, <tool_call>{json}</tool_call> (--tool-call-parser hermes)");
  if (f.enable_auto_tool_choice && f.tool_call_parser.empty())
    invalid("--enable-auto-tool-choice needs --tool-call-parser (qinfer's is hermes)");
  if (f.max_logprobs < -1) invalid("--max-logprobs must be -1 (no limit) or at least 0");
  if (f.max_input_tokens < 0) invalid("--max-input-tokens must be at least 0");
}

// One line for each flag whose vLLM meaning qinfer does not follow.
void warn_differences(const VllmServeFlags& f) {
  if (f.dtype != "auto" && f.dtype != "bfloat16")
    spdlog::warn(
        "--dtype {}: not applied; qinfer computes in bfloat16 on CUDA (float16 checkpoints are converted at "
        "load) and in float32 on the CPU",
        f.dtype);
  if (f.tokenizer_mode == "slow")
    spdlog::warn("--tokenizer-mode slow: qinfer has one tokenizer, its own BPE, which gives HF's token ids");
  if (f.trust_remote_code)
    spdlog::warn(
        "--trust-remote-code: nothing remote ever runs; qinfer implements Qwen3 itself and reads only "
        "config, tokenizer and weight files");
  if (!f.uvicorn_log_level.empty())
    spdlog::warn(
        "--uvicorn-log-level {}: not applied; qinfer has one log, set by --log-level (HTTP requests are "
        "logged at debug)",
        f.uvicorn_log_level);
}

// tokenizer_config.json's bos_token / eos_token: a string, {"content": ...} or null.
std::string special_token_text(const nlohmann::json& config, const char* field) {
  const auto it = config.find(field);
  if (it == config.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return "";
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorKind::kNotFound, "--chat-template " + path.string() + ": cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void add_vllm_serve_flags(CLI::App& serve, VllmServeFlags& f, server::ServerOptions& server) {
  serve.add_option("MODEL", f.model, "Model directory or HF repo id, as in `vllm serve MODEL` (same as --model)");
  serve.add_option("--dtype", f.dtype, "vLLM's compute dtype: qinfer always computes in bfloat16 (others warn)")
      ->check(CLI::IsMember({"auto", "half", "float16", "bfloat16", "float", "float32"}))
      ->capture_default_str();
  serve.add_option("--tokenizer-mode", f.tokenizer_mode, "auto | hf (qinfer's BPE); slow warns; mistral | custom: 5")
      ->check(CLI::IsMember({"auto", "hf", "slow", "mistral", "custom"}))
      ->capture_default_str();
  serve.add_flag("--trust-remote-code", f.trust_remote_code, "Accepted with a warning: nothing remote ever runs");
  serve.add_option("--chat-template", f.chat_template,
                   "Chat template: a Jinja file, or the template itself (default: the tokenizer's)");
  serve
      .add_option("--generation-config", f.generation_config,
                  "Sampling defaults: auto (the model's generation_config.json) | vllm (neutral) | DIR")
      ->capture_default_str();
  serve.add_option("--seed", f.seed,
                   "Seed of the engine's random seeds: the same requests in the same order give "
                   "the same tokens (default: nondeterministic)");
  serve.add_option("--max-logprobs", f.max_logprobs, "Top logprobs per token a request may ask for (-1: up to 20)")
      ->capture_default_str();
  serve
      .add_option("--max-input-tokens,--max-input-length", f.max_input_tokens,
                  "TGI: longest prompt in tokens (0: max-model-len - 1)")
      ->capture_default_str();
  serve
      .add_flag("--enable-log-requests,!--disable-log-requests", server.log_requests,
                "One info line per finished request (id, tokens, queue time, TTFT, duration, finish reason)")
      ->capture_default_str();
  serve.add_flag("--enable-auto-tool-choice", f.enable_auto_tool_choice,
                 "Parse the model's tool calls (qinfer always does when a request has tools)");
  serve.add_option("--tool-call-parser", f.tool_call_parser, "hermes (the Hermes/Qwen3 format); others: exit 5");
  serve.add_option("--uvicorn-log-level", f.uvicorn_log_level, "Accepted with a warning: use --log-level")
      ->check(CLI::IsMember({"critical", "error", "warning", "info", "debug", "trace"}));
  serve
      .add_option("--metrics-compat", f.metrics_compat,
                  "vllm: /metrics also exports vLLM's metric names and labels (vllm:*, model_name)")
      ->check(CLI::IsMember({"none", "vllm"}))
      ->capture_default_str();
  if (CLI::Option* origins = serve.get_option_no_throw("--allowed-origins"))
    origins->description("CORS: origins allowed to call the API ('*' for any); also vLLM's JSON list '[\"*\"]'");
}

void apply_vllm_serve_flags(const VllmServeFlags& f, ModelFlags& model, server::ServerOptions& server) {
  check_values(f);
  if (!f.model.empty()) {
    if (!model.model.empty() && model.model != f.model)
      invalid("MODEL '" + f.model + "' and --model '" + model.model + "' name different models; give one");
    model.model = f.model;
  }
  // vLLM's --tokenizer takes a repo id as well as a directory.
  if (!model.tokenizer.empty() && !std::filesystem::is_directory(model.tokenizer))
    model.tokenizer = resolve_model_dir(model.tokenizer).string();
  server.cors_origins = expand_origin_lists(server.cors_origins);
  server.vllm_metrics = f.metrics_compat == "vllm";
  warn_differences(f);
}

void apply_vllm_engine_flags(const VllmServeFlags& f, EngineOptions& options) {
  options.seed = f.seed;
  options.max_logprobs = f.max_logprobs;
  options.max_prompt_tokens = f.max_input_tokens;
}

ChatTemplate load_chat_template(const std::filesystem::path& tokenizer_dir, const std::string& flag) {
  if (flag.empty()) return ChatTemplate::from_model_dir(tokenizer_dir);
  std::string source;
  if (std::filesystem::is_regular_file(flag)) {
    source = read_text(flag);
    spdlog::info("chat template from {}", flag);
  } else if (flag.find_first_of("{}\n") != std::string::npos) {
    source = flag;  // vLLM: a value with template syntax is the template itself
    spdlog::info("chat template given inline ({} bytes)", flag.size());
  } else {
    throw Error(ErrorKind::kNotFound, "--chat-template " + flag + ": no such file (and not a Jinja template)");
  }
  nlohmann::json config = nlohmann::json::object();
  if (std::filesystem::exists(tokenizer_dir / "tokenizer_config.json"))
    config = read_json_file(tokenizer_dir / "tokenizer_config.json");
  return ChatTemplate::from_source(source, special_token_text(config, "bos_token"),
                                   special_token_text(config, "eos_token"));
}

GenerationDefaults generation_defaults(const ModelConfig& config, const std::string& flag) {
  if (flag == "auto") return config.generation;
  if (flag == "vllm") return GenerationDefaults{};
  const std::filesystem::path path = std::filesystem::path(flag) / "generation_config.json";
  if (!std::filesystem::exists(path))
    throw Error(ErrorKind::kNotFound, "--generation-config " + flag +
                                          ": no generation_config.json there (or give "
                                          "auto or vllm)");
  const nlohmann::json generation = read_json_file(path);
  // Parsed with the model's config so that the same rules (and errors naming the file) apply.
  return parse_model_config(model_config_to_json(config), "config.json", &generation, path).generation;
}

}  // namespace qinfer::cli
