// Where a --model ORG/NAME comes from: the local Hugging Face or ModelScope cache, downloaded first when it is not
// there (hub/). Flags shared by `download` and every command that loads a model.
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "hub/hub_options.h"

namespace qinfer::cli {

struct HubFlags {
  std::string revision;      // branch, tag or commit; empty: the hub's default
  std::string hf_token;      // overrides $HF_TOKEN and the saved login
  std::string model_source;  // huggingface | modelscope; empty: $VLLM_USE_MODELSCOPE decides
};

void add_hub_flags(CLI::App& cmd, HubFlags& flags);

ModelSource model_source_from_flags(const HubFlags& flags);
// The environment's hub settings with the flags applied.
hub::HubOptions hub_options_from_flags(const HubFlags& flags);

// `model` as a directory: itself when it is one; else the complete cached snapshot of ORG/NAME at the revision; else
// (not offline) the snapshot just downloaded. Throws Error as resolve_model_dir and hub::download_model do.
std::filesystem::path model_dir_from_flags(const std::string& model, const HubFlags& flags);

}  // namespace qinfer::cli
