// What a download talks to and where it writes: the hub (Hugging Face or ModelScope), its endpoint, the token, the
// offline switch and the files to fetch. Filled from the environment as huggingface_hub, vLLM and ModelScope read it,
// then from the command line.
#pragma once

#include <string>
#include <vector>

#include "model/model_path.h"

namespace qinfer::hub {

struct HubOptions {
  ModelSource source = ModelSource::kHuggingFace;
  // Base URL without a trailing slash: $HF_ENDPOINT (default https://huggingface.co) or, for ModelScope,
  // $MODELSCOPE_DOMAIN (a host, given https://, or a full URL; default https://www.modelscope.cn).
  std::string endpoint;
  // Sent as `Authorization: Bearer` to the endpoint only. HF: --hf-token, $HF_TOKEN, else the file `hf auth login`
  // writes ($HF_TOKEN_PATH, else $HF_HOME/token, else ~/.cache/huggingface/token). ModelScope: $MODELSCOPE_API_TOKEN.
  std::string token;
  bool offline = false;                 // $HF_HUB_OFFLINE=1: never touch the network, use the cache or fail
  std::vector<std::string> include;     // glob patterns (fnmatch) of repo files to fetch; empty: qwen3_model_files()
  int parallel_files = 8;               // files downloaded at once
  int attempts_per_file = 5;            // transfers of one file that may fail in a row before the download gives up
  double retry_backoff_seconds = 0.25;  // wait before the 2nd attempt, doubled for each further one
  bool progress_bar = false;            // draw a redrawn bar (stderr is a terminal); else one log line per file
};

// The environment's settings for `source`, before flags.
HubOptions hub_options_from_env(ModelSource source);

// ModelScope when VLLM_USE_MODELSCOPE is "true" or "1" (as vLLM reads it), else Hugging Face.
ModelSource model_source_from_env();

// The files a Qwen3 model needs: config, generation config, tokenizer files, chat template, safetensors and index.
const std::vector<std::string>& qwen3_model_files();

// True when `path` matches one of `patterns` (fnmatch, '*' also crossing '/', as huggingface_hub matches), or, when
// `patterns` is empty, one of qwen3_model_files() at the repo's top level.
bool wanted_file(const std::string& path, const std::vector<std::string>& patterns);

}  // namespace qinfer::hub
