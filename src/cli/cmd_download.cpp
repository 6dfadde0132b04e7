// qinfer download ORG/NAME: fetches a model into the local Hugging Face (or ModelScope) cache and prints its
// directory on stdout. Always asks the hub what the revision is now; files already cached are not fetched again.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/model_source.h"
#include "hub/snapshot_download.h"
#include "util/error.h"

namespace qinfer::cli {

namespace {

struct DownloadFlags {
  std::string repo_id;
  HubFlags hub;
  std::vector<std::string> include;
  int parallel_files = 8;
};

void run_download(const DownloadFlags& f) {
  if (!looks_like_repo_id(f.repo_id))
    throw Error(ErrorKind::kInvalidArgument, "download: '" + f.repo_id + "' is not an ORG/NAME repo id");
  hub::HubOptions options = hub_options_from_flags(f.hub);
  options.include = f.include;
  options.parallel_files = f.parallel_files;
  std::cout << hub::download_model(options, f.repo_id, f.hub.revision).string() << std::endl;
}

}  // namespace

void register_download(CLI::App& app) {
  auto f = std::make_shared<DownloadFlags>();
  CLI::App* cmd = app.add_subcommand("download", "Download a model into the local Hugging Face or ModelScope cache");
  cmd->add_option("repo_id", f->repo_id, "ORG/NAME")->required();
  add_hub_flags(*cmd, f->hub);
  cmd->add_option("--include", f->include,
                  "Only repo files matching this glob (repeatable; default: config, generation config, tokenizer "
                  "files, chat template, *.safetensors and their index)");
  cmd->add_option("--max-workers", f->parallel_files, "Files downloaded at once")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->callback([f] { run_download(*f); });
}

}  // namespace qinfer::cli
