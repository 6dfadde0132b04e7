// Finding a model: a local directory, or a Hugging Face repo id in the local HF cache.
#pragma once

#include <filesystem>
#include <string>

namespace qinfer {

// `spec` is a directory path, or "ORG/NAME" looked up under $HF_HUB_CACHE, else $HF_HOME/hub, else
// ~/.cache/huggingface/hub, as models--ORG--NAME/snapshots/REV with REV from refs/main (or the only snapshot).
// Throws Error(kNotFound) listing where it looked.
std::filesystem::path resolve_model_dir(const std::string& spec);

}  // namespace qinfer
