#include "model/model_path.h"

#include <cstdlib>
#include <fstream>
#include <vector>

#include "util/error.h"
#include "util/json_file.h"

namespace qinfer {

namespace fs = std::filesystem;

namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

fs::path home_cache() {
  if (std::string home = env_or_empty("HOME"); !home.empty()) return fs::path(home) / ".cache";
  return ".cache";
}

std::string first_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  if (in) std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

std::optional<fs::path> find_hf_snapshot(const std::string& repo_id, const std::string& revision) {
  const fs::path repo = hf_repo_dir(repo_id);
  const fs::path snapshots = repo / "snapshots";
  if (!fs::is_directory(snapshots)) return std::nullopt;
  const std::string rev = revision.empty() ? default_revision(ModelSource::kHuggingFace) : revision;
  if (is_commit_hash(rev)) return fs::is_directory(snapshots / rev) ? std::optional(snapshots / rev) : std::nullopt;
  const std::string commit = first_line(repo / "refs" / rev);
  if (!commit.empty() && fs::is_directory(snapshots / commit)) return snapshots / commit;
  if (!commit.empty() || rev != default_revision(ModelSource::kHuggingFace)) return std::nullopt;
  // A cache copied without refs/: the only snapshot stands for main.
  std::vector<fs::path> found;
  for (const auto& entry : fs::directory_iterator(snapshots))
    if (entry.is_directory()) found.push_back(entry.path());
  if (found.size() == 1) return found.front();
  return std::nullopt;
}

std::optional<fs::path> find_modelscope_snapshot(const std::string& repo_id, const std::string& revision) {
  const fs::path dir = modelscope_repo_dir(repo_id);
  if (!fs::exists(dir / "config.json")) return std::nullopt;
  if (revision.empty() || revision == default_revision(ModelSource::kModelScope)) return dir;
  // .mv: "Revision:REV,CreatedAt:..." (ModelScope's client) or "Revision:REV" (ours).
  const std::string mv = first_line(dir / ".mv");
  const std::string prefix = "Revision:" + revision;
  if (mv.rfind(prefix, 0) == 0 && (mv.size() == prefix.size() || mv[prefix.size()] == ',')) return dir;
  return std::nullopt;
}

}  // namespace

fs::path hf_hub_cache_dir() {
  if (std::string v = env_or_empty("HF_HUB_CACHE"); !v.empty()) return v;
  if (std::string v = env_or_empty("HF_HOME"); !v.empty()) return fs::path(v) / "hub";
  // huggingface_hub honours XDG_CACHE_HOME for its default; ModelScope's client does not.
  if (std::string xdg = env_or_empty("XDG_CACHE_HOME"); !xdg.empty()) return fs::path(xdg) / "huggingface" / "hub";
  return home_cache() / "huggingface" / "hub";
}

fs::path modelscope_cache_dir() {
  if (std::string v = env_or_empty("MODELSCOPE_CACHE"); !v.empty()) return v;
  return home_cache() / "modelscope" / "hub";
}

bool looks_like_repo_id(const std::string& spec) {
  auto slash = spec.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < spec.size() &&
         spec.find('/', slash + 1) == std::string::npos && spec[0] != '.' && spec.find("..") == std::string::npos;
}

std::string default_revision(ModelSource source) { return source == ModelSource::kModelScope ? "master" : "main"; }

bool is_commit_hash(const std::string& revision) {
  if (revision.size() != 40) return false;
  for (char c : revision)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

fs::path hf_repo_dir(const std::string& repo_id) {
  const size_t slash = repo_id.find('/');
  return hf_hub_cache_dir() / ("models--" + repo_id.substr(0, slash) + "--" + repo_id.substr(slash + 1));
}

fs::path modelscope_repo_dir(const std::string& repo_id) {
  const size_t slash = repo_id.find('/');
  std::string name = repo_id.substr(slash + 1);
  for (size_t pos = 0; (pos = name.find('.', pos)) != std::string::npos; pos += 3) name.replace(pos, 1, "___");
  return modelscope_cache_dir() / "models" / repo_id.substr(0, slash) / name;
}

std::optional<fs::path> find_cached_snapshot(const std::string& repo_id, const std::string& revision,
                                             ModelSource source) {
  return source == ModelSource::kModelScope ? find_modelscope_snapshot(repo_id, revision)
                                            : find_hf_snapshot(repo_id, revision);
}

bool snapshot_is_complete(const fs::path& dir) {
  if (!fs::exists(dir / "config.json") || !fs::exists(dir / "tokenizer.json")) return false;
  if (fs::exists(dir / "model.safetensors")) return true;
  const fs::path index = dir / "model.safetensors.index.json";
  if (!fs::exists(index)) return false;
  try {
    const nlohmann::json json = read_json_file(index);
    if (!json.contains("weight_map") || !json["weight_map"].is_object()) return false;
    for (const auto& [tensor, shard] : json["weight_map"].items())
      if (!shard.is_string() || !fs::exists(dir / shard.get<std::string>())) return false;
  } catch (const Error&) {
    return false;
  }
  return true;
}

fs::path resolve_model_dir(const std::string& spec, const std::string& revision, ModelSource source) {
  if (fs::is_directory(spec)) return spec;
  if (!looks_like_repo_id(spec))
    throw Error(ErrorKind::kNotFound, "model '" + spec + "' is neither a directory nor an ORG/NAME repo id");
  if (auto dir = find_cached_snapshot(spec, revision, source)) return *dir;
  const bool modelscope = source == ModelSource::kModelScope;
  const fs::path looked = modelscope ? modelscope_repo_dir(spec) : hf_repo_dir(spec) / "snapshots";
  const std::string rev = revision.empty() ? default_revision(source) : revision;
  throw Error(ErrorKind::kNotFound,
              "model '" + spec + "' (revision " + rev + ") is not a directory and not in the " +
                  (modelscope ? "ModelScope cache (looked in " + looked.string() + "; set MODELSCOPE_CACHE)"
                              : "Hugging Face cache (looked in " + looked.string() + "; set HF_HUB_CACHE or HF_HOME)") +
                  "; `qinfer download " + spec + "` fetches it");
}

}  // namespace qinfer
