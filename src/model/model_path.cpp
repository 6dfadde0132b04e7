#include "model/model_path.h"

#include <cstdlib>
#include <fstream>
#include <vector>

#include "util/error.h"

namespace qinfer {

namespace {

std::filesystem::path hub_cache_dir() {
  if (const char* v = std::getenv("HF_HUB_CACHE"); v && *v) return v;
  if (const char* v = std::getenv("HF_HOME"); v && *v) return std::filesystem::path(v) / "hub";
  if (const char* v = std::getenv("HOME"); v && *v) return std::filesystem::path(v) / ".cache/huggingface/hub";
  return ".cache/huggingface/hub";
}

bool looks_like_repo_id(const std::string& spec) {
  auto slash = spec.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < spec.size() &&
         spec.find('/', slash + 1) == std::string::npos && spec[0] != '.' && spec.find("..") == std::string::npos;
}

}  // namespace

std::filesystem::path resolve_model_dir(const std::string& spec) {
  if (std::filesystem::is_directory(spec)) return spec;
  if (!looks_like_repo_id(spec))
    throw Error(ErrorKind::kNotFound, "model '" + spec + "' is neither a directory nor an ORG/NAME repo id");
  std::string folder = "models--" + spec.substr(0, spec.find('/')) + "--" + spec.substr(spec.find('/') + 1);
  std::filesystem::path repo = hub_cache_dir() / folder;
  std::filesystem::path snapshots = repo / "snapshots";
  if (!std::filesystem::is_directory(snapshots))
    throw Error(ErrorKind::kNotFound, "model '" + spec +
                                          "' is not a directory and not in the Hugging Face cache (looked for " +
                                          snapshots.string() + "; set HF_HUB_CACHE or HF_HOME)");
  std::ifstream ref(repo / "refs" / "main");
  std::string revision;
  if (ref && std::getline(ref, revision) && !revision.empty() && std::filesystem::is_directory(snapshots / revision))
    return snapshots / revision;
  std::vector<std::filesystem::path> found;
  for (const auto& entry : std::filesystem::directory_iterator(snapshots))
    if (entry.is_directory()) found.push_back(entry.path());
  if (found.size() == 1) return found.front();
  throw Error(ErrorKind::kNotFound, "model '" + spec + "': " + snapshots.string() + " has " +
                                        std::to_string(found.size()) + " snapshots and no usable refs/main");
}

}  // namespace qinfer
