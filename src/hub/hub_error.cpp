#include "hub/hub_error.h"

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace qinfer::hub {

namespace {

std::string hub_name(const HubOptions& o) {
  return o.source == ModelSource::kModelScope ? "ModelScope (" + o.endpoint + ")"
                                              : "the Hugging Face hub (" + o.endpoint + ")";
}

// The hub's own words: HF's X-Error-Message header or JSON {"error": ...}; ModelScope's JSON {"Message": ...}.
std::string server_message(const HttpResponse& r) {
  if (!r.header("x-error-message").empty()) return r.header("x-error-message");
  const nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
  if (body.is_object()) {
    for (const char* key : {"error", "Message", "message"})
      if (body.contains(key) && body[key].is_string()) return body[key].get<std::string>();
  }
  return "";
}

std::string token_hint(const HubOptions& o) {
  if (o.source == ModelSource::kModelScope)
    return o.token.empty() ? "set MODELSCOPE_API_TOKEN" : "the token in MODELSCOPE_API_TOKEN was refused";
  return o.token.empty() ? "set a token with --hf-token or HF_TOKEN (after accepting the repo's terms on its page)"
                         : "the token given (--hf-token, HF_TOKEN or the saved login) has no access: accept the "
                           "repo's terms on its page or use another token";
}

}  // namespace

bool is_retryable(const HttpResponse& r) {
  if (r.code != CURLE_OK) return r.code != CURLE_WRITE_ERROR;
  return r.status == 408 || r.status == 429 || r.status >= 500;
}

void throw_hub_error(const HubOptions& o, const HttpResponse& r, const HubTarget& t) {
  const std::string repo = "'" + t.repo_id + "'";
  const std::string where = t.file.empty() ? repo + " at revision '" + t.revision + "'"
                                           : "'" + t.file + "' of " + repo + " at revision '" + t.revision + "'";
  if (r.code != CURLE_OK)
    throw Error(ErrorKind::kUnavailable,
                "cannot reach " + hub_name(o) + " for " + where + ": " + r.error +
                    (o.source == ModelSource::kModelScope ? " (network down? set MODELSCOPE_DOMAIN for another host)"
                                                          : " (network down? HF_ENDPOINT picks a mirror; "
                                                            "HF_HUB_OFFLINE=1 uses only the local cache)"));
  const std::string code = r.header("x-error-code");
  std::string detail = server_message(r);
  detail = detail.empty() ? "" : " (" + detail + ")";
  const std::string status = "HTTP " + std::to_string(r.status);
  if (code == "GatedRepo" || ((r.status == 401 || r.status == 403) && code != "RepoNotFound"))
    throw Error(ErrorKind::kInvalidArgument, hub_name(o) + " refused " + where + " with " + status + detail +
                                                 ": the repo is gated or private; " + token_hint(o));
  if (code == "RepoNotFound" || (r.status == 404 && t.file.empty() && code.empty()))
    throw Error(ErrorKind::kNotFound, "repository " + repo + " not found on " + hub_name(o) + detail +
                                          (o.token.empty() ? "; if it is private, set a token" : ""));
  if (code == "RevisionNotFound")
    throw Error(ErrorKind::kNotFound, "revision '" + t.revision + "' not found in " + repo + detail);
  if (r.status == 404) throw Error(ErrorKind::kNotFound, "file " + where + " not found on " + hub_name(o) + detail);
  if (is_retryable(r))
    throw Error(ErrorKind::kUnavailable, hub_name(o) + " is unavailable for " + where + ": " + status + detail);
  throw Error(ErrorKind::kInternal, hub_name(o) + " answered " + status + " for " + where + detail);
}

}  // namespace qinfer::hub
