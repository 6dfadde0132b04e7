#include "hub/hub_options.h"

#include <fnmatch.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace qinfer::hub {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool env_true(const char* name) {
  const std::string v = env(name);
  return v == "1" || v == "true" || v == "TRUE" || v == "True" || v == "yes" || v == "on";
}

std::string without_trailing_slash(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

std::string read_token_file() {
  std::filesystem::path file = env("HF_TOKEN_PATH");
  if (file.empty()) {
    const std::string hf_home = env("HF_HOME");
    file = !hf_home.empty() ? std::filesystem::path(hf_home) / "token" : hf_hub_cache_dir().parent_path() / "token";
  }
  std::ifstream in(file);
  std::string token;
  if (in) std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

}  // namespace

ModelSource model_source_from_env() {
  return env_true("VLLM_USE_MODELSCOPE") ? ModelSource::kModelScope : ModelSource::kHuggingFace;
}

HubOptions hub_options_from_env(ModelSource source) {
  HubOptions o;
  o.source = source;
  o.offline = env_true("HF_HUB_OFFLINE");
  o.progress_bar = isatty(STDERR_FILENO) == 1;
  if (source == ModelSource::kModelScope) {
    std::string domain = env("MODELSCOPE_DOMAIN");
    if (domain.empty()) domain = "www.modelscope.cn";
    o.endpoint = without_trailing_slash(domain.find("://") == std::string::npos ? "https://" + domain : domain);
    o.token = env("MODELSCOPE_API_TOKEN");
  } else {
    const std::string endpoint = env("HF_ENDPOINT");
    o.endpoint = without_trailing_slash(endpoint.empty() ? "https://huggingface.co" : endpoint);
    o.token = env("HF_TOKEN");
    if (o.token.empty()) o.token = read_token_file();
  }
  return o;
}

const std::vector<std::string>& qwen3_model_files() {
  static const std::vector<std::string> kFiles = {"config.json",
                                                  "generation_config.json",
                                                  "tokenizer.json",
                                                  "tokenizer_config.json",
                                                  "vocab.json",
                                                  "merges.txt",
                                                  "special_tokens_map.json",
                                                  "added_tokens.json",
                                                  "chat_template.jinja",
                                                  "model.safetensors.index.json",
                                                  "*.safetensors"};
  return kFiles;
}

bool wanted_file(const std::string& path, const std::vector<std::string>& patterns) {
  const int flags = patterns.empty() ? FNM_PATHNAME : 0;
  for (const std::string& pattern : patterns.empty() ? qwen3_model_files() : patterns)
    if (fnmatch(pattern.c_str(), path.c_str(), flags) == 0) return true;
  return false;
}

}  // namespace qinfer::hub
