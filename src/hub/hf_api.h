// The Hugging Face hub's protocol, as huggingface_hub speaks it (and mirrors such as hf-mirror.com answer it):
//   GET  {endpoint}/api/models/ORG/NAME/revision/REV  -> {"sha": COMMIT, "siblings": [{"rfilename": PATH}, ...]}
//   HEAD {endpoint}/ORG/NAME/resolve/COMMIT/PATH      -> X-Repo-Commit, ETag (git blob id) or, for LFS files,
//        X-Linked-Etag (sha256) + X-Linked-Size and a redirect (Location) to the CDN that serves the bytes.
// Relative redirects (a renamed repo) are followed; an absolute one is where the bytes are fetched from.
#pragma once

#include <string>

#include "hub/hub_options.h"
#include "hub/remote_repo.h"
#include "util/curl_api.h"

namespace qinfer::hub {

// The commit `revision` points at and the repo's file names (sizes and checksums still unknown).
RemoteRepo hf_repo_listing(const CurlApi& curl, const HubOptions& options, const std::string& repo_id,
                           const std::string& revision);

// Fills file.etag, size, sha256 (LFS files) and url from the resolve endpoint's headers at repo.commit.
void hf_resolve_file(const CurlApi& curl, const HubOptions& options, const RemoteRepo& repo, RemoteFile& file);

// ETag header value without a weak marker and quotes: W/"abc" -> abc.
std::string normalize_etag(const std::string& etag);

// "Authorization: Bearer TOKEN" when options.token is set (sent to the endpoint's host only).
std::vector<std::string> auth_headers(const HubOptions& options);

// "scheme://host[:port]" of a URL.
std::string url_origin(const std::string& url);

// Each '/'-separated segment of `path` percent-encoded, the slashes kept.
std::string escape_path(const CurlApi& curl, const std::string& path);

}  // namespace qinfer::hub
