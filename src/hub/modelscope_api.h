// ModelScope's file API, as its Python client (modelscope.hub) speaks it:
//   GET {endpoint}/api/v1/models/ORG/NAME/repo/files?Revision=REV&Recursive=True
//       -> {"Code": 200, "Data": {"Files": [{"Path", "Type": "blob"|"tree", "Size", "Sha256", "Revision"}, ...]}}
//   GET {endpoint}/api/v1/models/ORG/NAME/repo?Revision=REV&FilePath=PATH  -> the bytes (ranges honoured)
#pragma once

#include <string>

#include "hub/hub_options.h"
#include "hub/remote_repo.h"
#include "util/curl_api.h"

namespace qinfer::hub {

// Every file (not folders) with size, sha256 and download URL; commit: the files' Revision (a commit id).
RemoteRepo modelscope_repo_listing(const CurlApi& curl, const HubOptions& options, const std::string& repo_id,
                                   const std::string& revision);

}  // namespace qinfer::hub
