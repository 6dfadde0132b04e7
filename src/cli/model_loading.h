// Flags shared by commands that load a model: --model, --load-format, --preset/--config for dummy weights.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "backend/backend.h"
#include "model/qwen3_weights.h"

namespace qinfer::cli {

struct ModelFlags {
  std::string model;                 // directory or HF repo id
  std::string load_format = "auto";  // auto | dummy
  std::string preset;                // dummy: test-model preset
  std::string config;                // dummy: config.json path
  uint64_t seed = 0;                 // dummy: weight seed
};

void add_model_flags(CLI::App& cmd, ModelFlags& flags);
void add_backend_flags(CLI::App& cmd, BackendOptions& options);

// Loads the model the flags name (the built-in demo model when none is named); logs what and how long it took.
std::shared_ptr<const LoadedModel> load_model_from_flags(const ModelFlags& flags);

}  // namespace qinfer::cli
