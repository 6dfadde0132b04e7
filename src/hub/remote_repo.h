// What a hub says about a repo at a revision, independent of which hub said it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qinfer::hub {

struct RemoteFile {
  std::string path;    // in the repo, '/'-separated
  int64_t size = -1;   // bytes; -1: the hub did not say
  std::string sha256;  // lower-case hex, verified before the file moves into place; empty: the hub publishes none
  // Hugging Face: the file's name in blobs/ (the sha256 of an LFS file, the git blob id of a small one).
  std::string etag;
  std::string url;  // where the bytes come from (the hub's redirect target when it gave one)
};

struct RemoteRepo {
  std::string repo_id;
  std::string revision;  // as asked (branch, tag or commit)
  std::string commit;    // what it resolved to (Hugging Face: 40 hex digits; ModelScope: its revision id)
  std::vector<RemoteFile> files;
};

// Which request failed, for error messages: the repo, its revision and (for file requests) the file.
struct HubTarget {
  std::string repo_id;
  std::string revision;
  std::string file;
};

}  // namespace qinfer::hub
