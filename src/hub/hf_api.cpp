#include "hub/hf_api.h"

#include <nlohmann/json.hpp>

#include "hub/hub_error.h"
#include "util/error.h"
#include "util/http_request.h"

namespace qinfer::hub {

namespace {

constexpr double kApiTimeoutSeconds = 60;
constexpr int kMaxRelativeRedirects = 5;

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

int64_t header_int(const HttpResponse& r, const char* name) {
  const std::string& v = r.header(name);
  if (v.empty()) return -1;
  try {
    return std::stoll(v);
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

std::string normalize_etag(const std::string& etag) {
  std::string e = etag.rfind("W/", 0) == 0 ? etag.substr(2) : etag;
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return e;
}

std::vector<std::string> auth_headers(const HubOptions& options) {
  if (options.token.empty()) return {};
  return {"Authorization: Bearer " + options.token};
}

std::string url_origin(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  const size_t path = url.find('/', scheme + 3);
  return path == std::string::npos ? url : url.substr(0, path);
}

std::string escape_path(const CurlApi& curl, const std::string& path) {
  std::string out;
  size_t start = 0;
  while (true) {
    const size_t slash = path.find('/', start);
    out += url_escape(curl, path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) return out;
    out += '/';
    start = slash + 1;
  }
}

RemoteRepo hf_repo_listing(const CurlApi& curl, const HubOptions& options, const std::string& repo_id,
                           const std::string& revision) {
  const HubTarget target{repo_id, revision, ""};
  HttpRequest request;
  request.url =
      options.endpoint + "/api/models/" + escape_path(curl, repo_id) + "/revision/" + url_escape(curl, revision);
  request.headers = auth_headers(options);
  request.follow_redirects = true;
  request.timeout_seconds = kApiTimeoutSeconds;
  HttpResponse response = http_request(curl, request);
  if (response.code != CURLE_OK || response.status != 200) throw_hub_error(options, response, target);
  const nlohmann::json info = nlohmann::json::parse(response.body, nullptr, false);
  if (!info.is_object() || !info.contains("sha") || !info["sha"].is_string() || !info.contains("siblings") ||
      !info["siblings"].is_array())
    throw Error(ErrorKind::kFormat, request.url + ": the model-info answer has no 'sha' string and 'siblings' list");
  RemoteRepo repo;
  repo.repo_id = repo_id;
  repo.revision = revision;
  repo.commit = info["sha"].get<std::string>();
  for (const nlohmann::json& sibling : info["siblings"]) {
    if (!sibling.is_object() || !sibling.contains("rfilename") || !sibling["rfilename"].is_string())
      throw Error(ErrorKind::kFormat, request.url + ": a 'siblings' entry has no 'rfilename' string");
    RemoteFile file;
    file.path = sibling["rfilename"].get<std::string>();
    repo.files.push_back(std::move(file));
  }
  return repo;
}

void hf_resolve_file(const CurlApi& curl, const HubOptions& options, const RemoteRepo& repo, RemoteFile& file) {
  const HubTarget target{repo.repo_id, repo.revision, file.path};
  HttpRequest request;
  request.url = options.endpoint + "/" + escape_path(curl, repo.repo_id) + "/resolve/" + url_escape(curl, repo.commit) +
                "/" + escape_path(curl, file.path);
  request.head = true;
  request.headers = auth_headers(options);
  request.headers.push_back("Accept-Encoding: identity");  // the size and ETag of the bytes, not of a compression
  request.timeout_seconds = kApiTimeoutSeconds;
  HttpResponse response;
  for (int hop = 0;; ++hop) {
    response = http_request(curl, request);
    const std::string& location = response.header("location");
    const bool redirect = response.code == CURLE_OK && response.status >= 300 && response.status < 400;
    if (!redirect || location.empty() || location.front() != '/' || hop == kMaxRelativeRedirects) break;
    request.url = url_origin(request.url) + location;
  }
  if (response.code != CURLE_OK || response.status >= 400) throw_hub_error(options, response, target);
  const std::string& commit = response.header("x-repo-commit");
  if (!commit.empty() && commit != repo.commit)
    throw Error(ErrorKind::kFormat, request.url + ": X-Repo-Commit " + commit + " differs from the listed commit " +
                                        repo.commit + " (the revision moved during the download; run again)");
  const std::string linked = normalize_etag(response.header("x-linked-etag"));
  file.etag = !linked.empty() ? linked : normalize_etag(response.header("etag"));
  if (file.etag.empty() || file.etag.find('/') != std::string::npos || file.etag.find("..") != std::string::npos)
    throw Error(ErrorKind::kFormat, request.url + ": no usable ETag or X-Linked-Etag header in the hub's answer");
  file.sha256 = !linked.empty() && is_sha256_hex(linked) ? linked : "";
  file.size = header_int(response, "x-linked-size");
  if (file.size < 0 && response.status < 300) file.size = header_int(response, "content-length");
  const std::string& location = response.header("location");
  file.url = response.status >= 300 && !location.empty() ? location : request.url;
}

}  // namespace qinfer::hub
