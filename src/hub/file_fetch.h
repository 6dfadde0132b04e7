// One file from a hub to disk: resumed from its partial file by an HTTP range, retried when the connection drops,
// checked against the published size and sha256, then renamed into place (so a file that looks complete always is).
#pragma once

#include <atomic>
#include <filesystem>

#include "hub/download_progress.h"
#include "hub/hub_options.h"
#include "hub/remote_repo.h"
#include "util/curl_api.h"

namespace qinfer::hub {

struct FetchJob {
  RemoteFile file;                    // url, size and sha256 (either may be unknown)
  std::filesystem::path partial;      // where bytes collect; kept on failure so the next run resumes
  std::filesystem::path destination;  // where the verified file is renamed to (same file system as `partial`)
  HubTarget target;                   // for messages
};

// Throws Error: kOutOfMemory (disk full; partial kept), kFormat (size or checksum mismatch; partial removed),
// kUnavailable (network, after options.attempts_per_file failed attempts in a row; partial kept), or the hub's
// answer (throw_hub_error). Gives up with kInternal "cancelled" as soon as `cancel` becomes true.
void fetch_file(const CurlApi& curl, const HubOptions& options, const FetchJob& job, DownloadProgress& progress,
                const std::atomic<bool>& cancel);

// Bytes of `path` on disk, 0 when it does not exist.
int64_t file_size_or_zero(const std::filesystem::path& path);

}  // namespace qinfer::hub
