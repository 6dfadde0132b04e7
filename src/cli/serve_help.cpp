#include "cli/serve_help.h"

#include <string_view>
#include <utility>
#include <vector>

namespace qinfer::cli {
namespace {

constexpr const char* kModel = "Model";
constexpr const char* kEngine = "Engine";
constexpr const char* kKvCache = "KV cache";
constexpr const char* kApi = "API and requests";
constexpr const char* kHttp = "HTTP server";
constexpr const char* kLogs = "Logs and metrics";

// Flag (its first name) -> group. docs/CLI.md has the same groups with each flag's vLLM equivalent.
constexpr std::pair<std::string_view, const char*> kGroups[] = {
    {"MODEL", kModel},
    {"--model", kModel},
    {"--tokenizer", kModel},
    {"--tokenizer-mode", kModel},
    {"--trust-remote-code", kModel},
    {"--chat-template", kModel},
    {"--generation-config", kModel},
    {"--dtype", kModel},
    {"--quantization", kModel},
    {"--load-format", kModel},
    {"--preset", kModel},
    {"--config", kModel},
    {"--weight-seed", kModel},
    {"--revision", kModel},
    {"--hf-token", kModel},
    {"--model-source", kModel},
    {"--device", kEngine},
    {"--tensor-parallel-size", kEngine},
    {"--tensor-parallel-same-device", kEngine},
    {"--max-model-len", kEngine},
    {"--max-num-seqs", kEngine},
    {"--max-num-batched-tokens", kEngine},
    {"--enable-prefix-caching", kEngine},
    {"--enable-chunked-prefill", kEngine},
    {"--long-prefill-token-threshold", kEngine},
    {"--max-num-partial-prefills", kEngine},
    {"--max-long-partial-prefills", kEngine},
    {"--enable-cost-based-chunking", kEngine},
    {"--target-itl-ms", kEngine},
    {"--scheduling-policy", kEngine},
    {"--speculative-config", kEngine},
    {"--enforce-eager", kEngine},
    {"--gemm-tuning-cache", kEngine},
    {"--threads", kEngine},
    {"--seed", kEngine},
    {"--gpu-memory-utilization", kKvCache},
    {"--kv-cache-memory-bytes", kKvCache},
    {"--kv-cache-dtype", kKvCache},
    {"--block-size", kKvCache},
    {"--served-model-name", kApi},
    {"--max-logprobs", kApi},
    {"--max-input-tokens", kApi},
    {"--enable-auto-tool-choice", kApi},
    {"--tool-call-parser", kApi},
    {"--reasoning-parser", kApi},
    {"--allow-special-tokens-in-content", kApi},
    {"--response-cache-size", kApi},
    {"--host", kHttp},
    {"--port", kHttp},
    {"--api-key", kHttp},
    {"--allowed-origins", kHttp},
    {"--max-concurrent-requests", kHttp},
    {"--max-queue-len", kHttp},
    {"--request-timeout", kHttp},
    {"--shutdown-grace-seconds", kHttp},
    {"--max-body-bytes", kHttp},
    {"--max-header-bytes", kHttp},
    {"--max-header-count", kHttp},
    {"--header-timeout", kHttp},
    {"--read-timeout", kHttp},
    {"--write-timeout", kHttp},
    {"--keep-alive-timeout", kHttp},
    {"--http-threads", kHttp},
    {"--enable-log-requests", kLogs},
    {"--uvicorn-log-level", kLogs},
    {"--metrics-compat", kLogs},
};

const char* group_of(const CLI::Option& option) {
  std::vector<std::string> names;
  for (const std::string& name : option.get_lnames()) names.push_back("--" + name);
  if (option.get_lnames().empty()) names.push_back(option.get_name(true));  // a positional
  for (const auto& [flag, group] : kGroups)
    for (const std::string& name : names)
      if (name == flag) return group;
  return "Other";
}

}  // namespace

void group_serve_flags(CLI::App& serve) {
  for (CLI::Option* option : serve.get_options()) {
    if (option == serve.get_help_ptr()) continue;
    option->group(group_of(*option));
  }
}

}  // namespace qinfer::cli
