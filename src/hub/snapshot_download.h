// Downloading a model repo into the local cache the hub's own client uses, so that transformers, vLLM, `hf` and
// ModelScope's client see the same copy (model/model_path.h describes both layouts):
//  1. list the repo at the revision (its commit and files), keep the files `options.include` selects;
//  2. ask for each file's size, checksum and download URL, skip those already cached, check the free disk space;
//  3. fetch the rest options.parallel_files at a time (hub/file_fetch.h), each under the same lock file
//     huggingface_hub takes (.locks/), the first failure cancelling the others;
//  4. link each file into snapshots/COMMIT/ (Hugging Face) and record the revision (refs/REV, ModelScope's .mv).
#pragma once

#include <filesystem>
#include <string>

#include "hub/hub_options.h"

namespace qinfer::hub {

// Returns the snapshot directory. Offline (options.offline): the cached snapshot or Error(kNotFound); nothing else.
// Errors as file_fetch.h and hub_error.h describe; kUnsupported when the repo has no .safetensors weights.
std::filesystem::path download_model(const HubOptions& options, const std::string& repo_id,
                                     const std::string& revision);

// The relative symlink target from snapshots/COMMIT/PATH to blobs/ETAG: "../../blobs/E" for a top-level file.
std::filesystem::path blob_link_target(const std::string& path, const std::string& etag);

}  // namespace qinfer::hub
