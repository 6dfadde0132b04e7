// Finding a model: a local directory, or a repo id (ORG/NAME) in the local Hugging Face or ModelScope cache.
//
// Hugging Face cache (shared with transformers, vLLM and `hf`): $HF_HUB_CACHE, else $HF_HOME/hub, else
// ~/.cache/huggingface/hub; a repo is models--ORG--NAME/ with blobs/ (files named by their ETag), snapshots/COMMIT/
// (the repo's file tree as relative symlinks into blobs/) and refs/REVISION (the commit a branch or tag pointed at).
// ModelScope cache: $MODELSCOPE_CACHE, else ~/.cache/modelscope/hub; a repo is models/ORG/NAME/ with the files in
// place, NAME's dots written as "___" as ModelScope's client does, and .mv holding the downloaded revision.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace qinfer {

enum class ModelSource { kHuggingFace, kModelScope };

std::filesystem::path hf_hub_cache_dir();
std::filesystem::path modelscope_cache_dir();

// "ORG/NAME": one slash, both parts non-empty, no "..", not starting with '.'.
bool looks_like_repo_id(const std::string& spec);
// The default revision of each hub: "main" (Hugging Face), "master" (ModelScope).
std::string default_revision(ModelSource source);
// A 40-hex-digit git commit id (a revision that needs no refs/ lookup).
bool is_commit_hash(const std::string& revision);

// models--ORG--NAME under hf_hub_cache_dir().
std::filesystem::path hf_repo_dir(const std::string& repo_id);
// models/ORG/NAME (dots of NAME as "___") under modelscope_cache_dir().
std::filesystem::path modelscope_repo_dir(const std::string& repo_id);

// The cached snapshot of `repo_id` at `revision` (empty: the hub's default), or nullopt when there is none.
// Hugging Face: snapshots/REV for a commit id, else snapshots/(refs/REV); with the default revision and no refs/main,
// the only snapshot. ModelScope: the repo directory when it holds config.json and its .mv names `revision` (or the
// default revision was asked for).
std::optional<std::filesystem::path> find_cached_snapshot(const std::string& repo_id, const std::string& revision,
                                                          ModelSource source);

// True when `dir` holds what loading a model needs: config.json, tokenizer.json, and model.safetensors or the index
// with every shard it names. A download killed part-way leaves a snapshot that fails this.
bool snapshot_is_complete(const std::filesystem::path& dir);

// `spec` is a directory path, or ORG/NAME found by find_cached_snapshot. Throws Error(kNotFound) listing where it
// looked and how to download it.
std::filesystem::path resolve_model_dir(const std::string& spec, const std::string& revision = "",
                                        ModelSource source = ModelSource::kHuggingFace);

}  // namespace qinfer
