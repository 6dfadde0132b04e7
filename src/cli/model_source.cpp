#include "cli/model_source.h"

#include "hub/snapshot_download.h"
#include "model/model_path.h"
#include "util/logging.h"

namespace qinfer::cli {

void add_hub_flags(CLI::App& cmd, HubFlags& flags) {
  cmd.add_option("--revision", flags.revision,
                 "Revision of an ORG/NAME model on the hub: branch, tag or commit (default: main; ModelScope: master)");
  cmd.add_option("--hf-token", flags.hf_token,
                 "Hugging Face token for gated or private repos (default: $HF_TOKEN, else the saved `hf auth login`)");
  cmd.add_option(
         "--model-source", flags.model_source,
         "Hub for ORG/NAME models: huggingface ($HF_ENDPOINT, $HF_HUB_CACHE) or modelscope ($MODELSCOPE_DOMAIN, "
         "$MODELSCOPE_CACHE; the default when VLLM_USE_MODELSCOPE=true)")
      ->check(CLI::IsMember({"huggingface", "modelscope"}));
}

ModelSource model_source_from_flags(const HubFlags& flags) {
  if (flags.model_source.empty()) return hub::model_source_from_env();
  return flags.model_source == "modelscope" ? ModelSource::kModelScope : ModelSource::kHuggingFace;
}

hub::HubOptions hub_options_from_flags(const HubFlags& flags) {
  hub::HubOptions options = hub::hub_options_from_env(model_source_from_flags(flags));
  if (!flags.hf_token.empty() && options.source == ModelSource::kHuggingFace) options.token = flags.hf_token;
  return options;
}

std::filesystem::path model_dir_from_flags(const std::string& model, const HubFlags& flags) {
  if (std::filesystem::is_directory(model) || !looks_like_repo_id(model))
    return resolve_model_dir(model, flags.revision, model_source_from_flags(flags));
  const hub::HubOptions options = hub_options_from_flags(flags);
  const auto cached = find_cached_snapshot(model, flags.revision, options.source);
  if (cached && (snapshot_is_complete(*cached) || options.offline)) return *cached;
  spdlog::info("{} is {} the local cache: downloading it from {}", model, cached ? "incomplete in" : "not in",
               options.endpoint);
  return hub::download_model(options, model, flags.revision);
}

}  // namespace qinfer::cli
