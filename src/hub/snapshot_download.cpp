#include "hub/snapshot_download.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "hub/file_fetch.h"
#include "hub/hf_api.h"
#include "hub/modelscope_api.h"
#include "util/error.h"
#include "util/logging.h"

namespace qinfer::hub {

namespace fs = std::filesystem;

namespace {

// Calls fn(i) for i in [0, n) on up to `workers` threads. The first exception cancels the rest (they see `cancel`
// and stop) and is rethrown once all threads have ended.
void for_each_parallel(size_t n, int workers, const std::function<void(size_t, const std::atomic<bool>&)>& fn) {
  std::atomic<size_t> next{0};
  std::atomic<bool> cancel{false};
  std::mutex mutex;
  std::exception_ptr first_error;
  auto work = [&] {
    for (size_t i; !cancel && (i = next++) < n;) {
      try {
        fn(i, cancel);
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!first_error) first_error = std::current_exception();
        cancel = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < std::min<int>(workers, static_cast<int>(n)); ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

// An exclusive flock on `path`, as huggingface_hub's filelock takes it, released on destruction.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) {
    fs::create_directories(path.parent_path());
    fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0 || flock(fd_, LOCK_EX) != 0) throw Error(ErrorKind::kInternal, "cannot lock " + path.string());
  }
  ~FileLock() {
    flock(fd_, LOCK_UN);
    close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// Writes `text` to `path` through a temporary file and a rename.
void write_atomically(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out) throw Error(ErrorKind::kInternal, "cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

void link_atomically(const fs::path& target, const fs::path& link) {
  fs::create_directories(link.parent_path());
  const fs::path tmp = link.string() + ".tmp" + std::to_string(getpid());
  fs::remove(tmp);
  fs::create_symlink(target, tmp);
  fs::rename(tmp, link);
}

bool safe_repo_path(const std::string& path) {
  return !path.empty() && path.front() != '/' && path.find("..") == std::string::npos &&
         path.find('\\') == std::string::npos;
}

void check_free_space(const fs::path& dir, int64_t needed) {
  fs::create_directories(dir);
  struct statvfs st {};
  if (statvfs(dir.c_str(), &st) != 0) return;
  const auto available = static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
  if (needed > available)
    throw Error(ErrorKind::kOutOfMemory, "not enough disk space in " + dir.string() + ": the download needs " +
                                             format_bytes(static_cast<double>(needed)) + ", " +
                                             format_bytes(static_cast<double>(available)) + " are free");
}

// What stays to do for one selected file.
struct Planned {
  FetchJob job;
  bool cached = false;
};

RemoteRepo list_repo(const CurlApi& curl, const HubOptions& o, const std::string& repo_id, const std::string& rev) {
  RemoteRepo repo = o.source == ModelSource::kModelScope ? modelscope_repo_listing(curl, o, repo_id, rev)
                                                         : hf_repo_listing(curl, o, repo_id, rev);
  std::vector<RemoteFile> selected;
  bool has_weights = false;
  for (RemoteFile& file : repo.files) {
    if (!safe_repo_path(file.path))
      throw Error(ErrorKind::kFormat, "the hub lists an unsafe file path '" + file.path + "' in '" + repo_id + "'");
    if (!wanted_file(file.path, o.include)) continue;
    has_weights |= file.path.size() > 12 && file.path.ends_with(".safetensors");
    selected.push_back(std::move(file));
  }
  if (selected.empty())
    throw Error(ErrorKind::kNotFound,
                "no file of '" + repo_id + "' at revision '" + rev + "' matches " +
                    (o.include.empty() ? std::string("the files a Qwen3 model needs") : "--include"));
  if (o.include.empty() && !has_weights)
    throw Error(ErrorKind::kUnsupported, "'" + repo_id + "' at revision '" + rev +
                                             "' has no .safetensors weights (qinfer loads safetensors only)");
  repo.files = std::move(selected);
  return repo;
}

std::vector<Planned> plan(const CurlApi& curl, const HubOptions& o, const RemoteRepo& repo) {
  std::vector<Planned> planned(repo.files.size());
  if (o.source == ModelSource::kModelScope) {
    const fs::path dir = modelscope_repo_dir(repo.repo_id);
    const fs::path temp = modelscope_cache_dir() / "models" / "._____temp" / repo.repo_id;
    const bool same_revision = find_cached_snapshot(repo.repo_id, repo.revision, o.source).has_value();
    for (size_t i = 0; i < planned.size(); ++i) {
      const RemoteFile& f = repo.files[i];
      planned[i].job = {f, temp / (f.path + ".incomplete"), dir / f.path, {repo.repo_id, repo.revision, f.path}};
      planned[i].cached = same_revision && fs::exists(dir / f.path) && file_size_or_zero(dir / f.path) == f.size;
    }
    return planned;
  }
  for_each_parallel(planned.size(), o.parallel_files, [&](size_t i, const std::atomic<bool>&) {
    RemoteFile f = repo.files[i];
    hf_resolve_file(curl, o, repo, f);
    const fs::path blobs = hf_repo_dir(repo.repo_id) / "blobs";
    planned[i].job = {f, blobs / (f.etag + ".incomplete"), blobs / f.etag, {repo.repo_id, repo.revision, f.path}};
    planned[i].cached = fs::exists(blobs / f.etag);
  });
  return planned;
}

// After a file is in place: the snapshot link (Hugging Face).
void publish(const HubOptions& o, const RemoteRepo& repo, const Planned& p) {
  if (o.source == ModelSource::kModelScope) return;
  const fs::path link = hf_repo_dir(repo.repo_id) / "snapshots" / repo.commit / p.job.file.path;
  link_atomically(blob_link_target(p.job.file.path, p.job.file.etag), link);
}

fs::path finish(const HubOptions& o, const RemoteRepo& repo) {
  if (o.source == ModelSource::kModelScope) {
    const fs::path dir = modelscope_repo_dir(repo.repo_id);
    write_atomically(dir / ".mv", "Revision:" + repo.revision);
    return dir;
  }
  const fs::path dir = hf_repo_dir(repo.repo_id);
  if (repo.revision != repo.commit) write_atomically(dir / "refs" / repo.revision, repo.commit);
  return dir / "snapshots" / repo.commit;
}

}  // namespace

fs::path blob_link_target(const std::string& path, const std::string& etag) {
  fs::path target;
  const auto depth = std::count(path.begin(), path.end(), '/');
  for (long i = 0; i < depth + 2; ++i) target /= "..";
  return target / "blobs" / etag;
}

fs::path download_model(const HubOptions& o, const std::string& repo_id, const std::string& revision_or_empty) {
  const std::string revision = revision_or_empty.empty() ? default_revision(o.source) : revision_or_empty;
  if (o.offline) {
    if (auto cached = find_cached_snapshot(repo_id, revision, o.source)) return *cached;
    throw Error(ErrorKind::kNotFound, "HF_HUB_OFFLINE is set and '" + repo_id + "' (revision " + revision +
                                          ") is not in the local cache: unset it to download, or copy the model in");
  }
  CurlSession session("downloading a model");
  const CurlApi& curl = session.api();
  const RemoteRepo repo = list_repo(curl, o, repo_id, revision);
  std::vector<Planned> planned = plan(curl, o, repo);
  std::vector<size_t> to_fetch;
  int64_t remaining = 0;
  int64_t total = 0;
  for (size_t i = 0; i < planned.size(); ++i) {
    if (planned[i].cached) {
      publish(o, repo, planned[i]);
      continue;
    }
    to_fetch.push_back(i);
    const int64_t size = std::max<int64_t>(0, planned[i].job.file.size);
    total += size;
    remaining += std::max<int64_t>(0, size - file_size_or_zero(planned[i].job.partial));
  }
  spdlog::info("{} at {} (commit {}): {} file(s), {} cached", repo_id, revision, repo.commit, planned.size(),
               planned.size() - to_fetch.size());
  if (!to_fetch.empty()) {
    check_free_space(planned[to_fetch.front()].job.partial.parent_path(), remaining);
    DownloadProgress progress(repo_id, o.progress_bar);
    progress.set_total(total, static_cast<int>(to_fetch.size()));
    const fs::path locks = o.source == ModelSource::kModelScope
                               ? modelscope_cache_dir() / ".locks" / repo_id
                               : hf_hub_cache_dir() / ".locks" / hf_repo_dir(repo_id).filename();
    for_each_parallel(to_fetch.size(), o.parallel_files, [&](size_t k, const std::atomic<bool>& cancel) {
      Planned& p = planned[to_fetch[k]];
      const std::string lock_name = o.source == ModelSource::kModelScope ? p.job.file.path : p.job.file.etag;
      FileLock lock(locks / (lock_name + ".lock"));
      if (!fs::exists(p.job.destination) || o.source == ModelSource::kModelScope)
        fetch_file(curl, o, p.job, progress, cancel);
      publish(o, repo, p);
      progress.file_done(p.job.file.path, p.job.file.size);
    });
    progress.finish();
  }
  return finish(o, repo);
}

}  // namespace qinfer::hub
