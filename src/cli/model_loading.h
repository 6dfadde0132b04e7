// Flags shared by commands that load a model: --model, --load-format, --preset/--config for dummy weights, and the
// hub flags for an ORG/NAME model (--revision, --hf-token, --model-source).
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "backend/backend.h"
#include "cli/model_source.h"
#include "model/qwen3_weights.h"

namespace qinfer::cli {

struct ModelFlags {
  std::string model;                 // directory or HF repo id
  std::string load_format = "auto";  // auto | dummy
  std::string preset;                // dummy: test-model preset
  std::string config;                // dummy: config.json path
  uint64_t seed = 0;                 // dummy: weight seed
  std::string tokenizer;             // directory with tokenizer.json (default: the model's)
  HubFlags hub;                      // where an ORG/NAME model comes from when it is not cached
};

void add_model_flags(CLI::App& cmd, ModelFlags& flags);
void add_backend_flags(CLI::App& cmd, BackendOptions& options);

// Where tokenizer.json comes from: --tokenizer; else the model directory; else, for dummy and demo models, the
// repository's fetched Qwen3 tokenizer (.assets/qwen3-tokenizer, looked up from the working directory and from the
// executable's location). nullopt when none exists.
std::optional<std::filesystem::path> find_tokenizer_dir(const ModelFlags& flags);

// Loads the model the flags name (the built-in demo model when none is named); logs what and how long it took.
std::shared_ptr<const LoadedModel> load_model_from_flags(const ModelFlags& flags);

}  // namespace qinfer::cli
