#include "hub/modelscope_api.h"

#include <nlohmann/json.hpp>

#include "hub/hf_api.h"
#include "hub/hub_error.h"
#include "util/error.h"
#include "util/http_request.h"

namespace qinfer::hub {

namespace {

constexpr double kApiTimeoutSeconds = 60;

template <typename T>
T field(const nlohmann::json& obj, const char* name, const std::string& url) {
  if (!obj.contains(name)) throw Error(ErrorKind::kFormat, url + ": a file entry has no '" + std::string(name) + "'");
  try {
    return obj[name].get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(ErrorKind::kFormat, url + ": a file entry's '" + std::string(name) + "' has the wrong type");
  }
}

}  // namespace

RemoteRepo modelscope_repo_listing(const CurlApi& curl, const HubOptions& options, const std::string& repo_id,
                                   const std::string& revision) {
  const HubTarget target{repo_id, revision, ""};
  const std::string repo_path = options.endpoint + "/api/v1/models/" + escape_path(curl, repo_id);
  HttpRequest request;
  request.url = repo_path + "/repo/files?Revision=" + url_escape(curl, revision) + "&Recursive=True";
  request.headers = auth_headers(options);
  request.follow_redirects = true;
  request.timeout_seconds = kApiTimeoutSeconds;
  const HttpResponse response = http_request(curl, request);
  if (response.code != CURLE_OK || response.status != 200) throw_hub_error(options, response, target);
  const nlohmann::json answer = nlohmann::json::parse(response.body, nullptr, false);
  if (!answer.is_object()) throw Error(ErrorKind::kFormat, request.url + ": the answer is not a JSON object");
  // ModelScope reports some failures in the body of an HTTP 200: {"Code": 404, "Message": ...}.
  if (answer.contains("Code") && answer["Code"].is_number() && answer["Code"].get<int>() != 200) {
    HttpResponse failed = response;
    failed.status = answer["Code"].get<int>();
    throw_hub_error(options, failed, target);
  }
  if (!answer.contains("Data") || !answer["Data"].is_object() || !answer["Data"].contains("Files") ||
      !answer["Data"]["Files"].is_array())
    throw Error(ErrorKind::kFormat, request.url + ": the answer has no Data.Files list");
  RemoteRepo repo;
  repo.repo_id = repo_id;
  repo.revision = revision;
  for (const nlohmann::json& entry : answer["Data"]["Files"]) {
    if (!entry.is_object()) throw Error(ErrorKind::kFormat, request.url + ": a file entry is not an object");
    if (field<std::string>(entry, "Type", request.url) != "blob") continue;
    RemoteFile file;
    file.path = field<std::string>(entry, "Path", request.url);
    file.size = field<int64_t>(entry, "Size", request.url);
    if (entry.contains("Sha256") && entry["Sha256"].is_string()) file.sha256 = entry["Sha256"].get<std::string>();
    if (entry.contains("Revision") && entry["Revision"].is_string() && repo.commit.empty())
      repo.commit = entry["Revision"].get<std::string>();
    file.url = repo_path + "/repo?Revision=" + url_escape(curl, revision) + "&FilePath=" + url_escape(curl, file.path);
    repo.files.push_back(std::move(file));
  }
  if (repo.commit.empty()) repo.commit = revision;
  return repo;
}

}  // namespace qinfer::hub
