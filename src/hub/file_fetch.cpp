#include "hub/file_fetch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "hub/hf_api.h"
#include "hub/hub_error.h"
#include "util/error.h"
#include "util/http_request.h"
#include "util/sha256.h"

namespace qinfer::hub {

namespace fs = std::filesystem;

namespace {

constexpr double kStallSeconds = 60;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string describe(const FetchJob& job) { return "'" + job.file.path + "' of '" + job.target.repo_id + "'"; }

// The partial file so far, hashed; a partial longer than the file is stale and dropped.
int64_t resume_point(const FetchJob& job, int fd, std::unique_ptr<Sha256>& hash) {
  int64_t have = file_size_or_zero(job.partial);
  if (job.file.size >= 0 && have > job.file.size) {
    if (ftruncate(fd, 0) != 0) throw Error(ErrorKind::kInternal, "cannot truncate " + job.partial.string());
    have = 0;
  }
  std::vector<char> buffer(1 << 20);
  for (int64_t offset = 0; offset < have;) {
    const ssize_t n = pread(fd, buffer.data(), buffer.size(), offset);
    if (n <= 0) throw Error(ErrorKind::kInternal, "cannot read " + job.partial.string() + ": " + std::strerror(errno));
    hash->update(buffer.data(), static_cast<size_t>(n));
    offset += n;
  }
  return have;
}

// Appends, retrying short writes; false with errno set on failure.
bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void verify_and_rename(const FetchJob& job, int fd, int64_t have, Sha256& hash) {
  if (job.file.size >= 0 && have != job.file.size) {
    fs::remove(job.partial);
    throw Error(ErrorKind::kFormat, describe(job) + ": got " + std::to_string(have) + " bytes, the hub announced " +
                                        std::to_string(job.file.size) + " (the download was removed; run again)");
  }
  if (!job.file.sha256.empty()) {
    const std::string got = hash.hex_digest();
    if (got != job.file.sha256) {
      fs::remove(job.partial);
      throw Error(ErrorKind::kFormat, describe(job) + ": checksum mismatch: sha256 " + got + ", the hub published " +
                                          job.file.sha256 + " (the download was removed; run again)");
    }
  }
  if (fsync(fd) != 0) throw Error(ErrorKind::kInternal, "fsync " + job.partial.string() + ": " + std::strerror(errno));
  fs::create_directories(job.destination.parent_path());
  fs::rename(job.partial, job.destination);
}

}  // namespace

int64_t file_size_or_zero(const fs::path& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

void fetch_file(const CurlApi& curl, const HubOptions& options, const FetchJob& job, DownloadProgress& progress,
                const std::atomic<bool>& cancel) {
  fs::create_directories(job.partial.parent_path());
  Fd fd(open(job.partial.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (fd.get() < 0)
    throw Error(ErrorKind::kInternal, "cannot open " + job.partial.string() + ": " + std::strerror(errno));
  auto hash = std::make_unique<Sha256>();
  int64_t have = resume_point(job, fd.get(), hash);
  // The endpoint's token goes only to the endpoint's host, never to a CDN the hub redirected to.
  const bool same_host = url_origin(job.file.url) == url_origin(options.endpoint);
  int failures = 0;
  while (job.file.size < 0 || have < job.file.size) {
    HttpRequest request;
    request.url = job.file.url;
    if (same_host) request.headers = auth_headers(options);
    request.headers.push_back("Accept-Encoding: identity");
    if (have > 0) request.headers.push_back("Range: bytes=" + std::to_string(have) + "-");
    request.follow_redirects = true;
    request.stall_timeout_seconds = kStallSeconds;
    int64_t received = 0;
    int write_errno = 0;
    bool first_chunk = true;
    request.on_body = [&](long status, const char* data, size_t size) {
      if (cancel) return false;
      if (first_chunk && status == 200 && have > 0) {  // the server ignored the range: start over
        if (ftruncate(fd.get(), 0) != 0) return false;
        hash = std::make_unique<Sha256>();
        have = 0;
      }
      first_chunk = false;
      if (!write_all(fd.get(), data, size)) {
        write_errno = errno;
        return false;
      }
      hash->update(data, size);
      have += static_cast<int64_t>(size);
      received += static_cast<int64_t>(size);
      progress.add(static_cast<int64_t>(size));
      return true;
    };
    const HttpResponse response = http_request(curl, request);
    if (cancel) throw Error(ErrorKind::kInternal, "cancelled");
    if (write_errno == ENOSPC || write_errno == EDQUOT)
      throw Error(ErrorKind::kOutOfMemory, "disk full writing " + job.partial.string() + " (" + describe(job) + ", " +
                                               std::to_string(have) +
                                               " bytes so far; the partial file is kept: free "
                                               "space and run again to resume)");
    if (write_errno != 0)
      throw Error(ErrorKind::kInternal, "cannot write " + job.partial.string() + ": " + std::strerror(write_errno));
    if (response.code == CURLE_OK && response.status == 416 && have > 0 && job.file.size < 0) break;
    if (response.code == CURLE_OK && response.status >= 200 && response.status < 300) {
      if (job.file.size < 0) break;
      if (have >= job.file.size) break;
    } else if (!is_retryable(response)) {
      throw_hub_error(options, response, job.target);
    }
    failures = received > 0 ? 1 : failures + 1;
    if (failures >= options.attempts_per_file) {
      const std::string reason = response.code != CURLE_OK ? response.error : "HTTP " + std::to_string(response.status);
      throw Error(ErrorKind::kUnavailable, describe(job) + ": the transfer failed " + std::to_string(failures) +
                                               " times in a row (" + reason + "); " + std::to_string(have) +
                                               " bytes are kept in " + job.partial.string() + ": run again to resume");
    }
    std::this_thread::sleep_for(
        std::chrono::duration<double>(options.retry_backoff_seconds * static_cast<double>(1 << (failures - 1))));
  }
  verify_and_rename(job, fd.get(), have, *hash);
}

}  // namespace qinfer::hub
