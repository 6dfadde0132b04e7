#include "loadgen/stream_client.h"

#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "loadgen/completion_chunk.h"
#include "loadgen/sse_reader.h"
#include "util/error.h"

namespace qinfer::loadgen {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorBodyBytes = 512;
constexpr double kProgressIntervalSeconds = 0.1;

double thread_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

// Each stream holds a socket; many systems start with a soft limit of 1024 open files. Raise it toward the hard limit.
void ensure_open_file_limit(size_t streams) {
  constexpr rlim_t kSpareFiles = 64;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = static_cast<rlim_t>(streams) + kSpareFiles;
  if (limit.rlim_cur >= wanted) return;
  limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? wanted : std::min(wanted, limit.rlim_max);
  setrlimit(RLIMIT_NOFILE, &limit);
}

std::string error_kind_of(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
      return kErrorConnect;
    case CURLE_OPERATION_TIMEDOUT:
      return kErrorTimeout;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
      return kErrorDisconnect;
    default:
      return kErrorOther;
  }
}

// One request in flight: its easy handle, its SSE reader and what has been measured so far.
struct Transfer {
  const CurlApi* curl = nullptr;
  CURL* easy = nullptr;
  size_t index = 0;
  Clock::time_point sent;
  long status = 0;
  bool done_seen = false;
  SseReader sse;
  std::string error_body;
  RequestRecord record;
  LoadProgress* progress = nullptr;

  void on_event(std::string_view data, double since_sent) {
    const CompletionChunk chunk = parse_completion_chunk(data);
    if (chunk.done) {
      done_seen = true;
      return;
    }
    if (chunk.error && record.error_kind.empty()) {
      record.error_kind = kErrorStream;
      record.error_message = *chunk.error;
    }
    if (chunk.has_text) {
      record.text_arrivals_s.push_back(since_sent);
      ++progress->text_events;
    }
    if (chunk.prompt_tokens) record.usage_prompt_tokens = chunk.prompt_tokens;
    if (chunk.completion_tokens) record.usage_completion_tokens = chunk.completion_tokens;
  }
};

size_t on_write(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  if (t->status == 0) t->curl->easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->status);
  if (t->status != 200) {
    t->error_body.append(data,
                         std::min(bytes, kMaxErrorBodyBytes - std::min(kMaxErrorBodyBytes, t->error_body.size())));
    return bytes;
  }
  const double since_sent = std::chrono::duration<double>(Clock::now() - t->sent).count();
  t->sse.feed(std::string_view(data, bytes),
              [t, since_sent](std::string_view event) { t->on_event(event, since_sent); });
  return bytes;
}

}  // namespace

// The multi handle, its epoll set and the timer libcurl asks for.
struct StreamClient::Loop {
  const CurlApi& curl;
  CURLM* multi = nullptr;
  int epoll_fd = -1;
  std::optional<Clock::time_point> timer_deadline;

  explicit Loop(const CurlApi& api) : curl(api) {
    multi = curl.multi_init();
    QINFER_CHECK(multi != nullptr, "curl_multi_init failed");
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd < 0) throw Error(ErrorKind::kInternal, std::string("epoll_create1: ") + std::strerror(errno));
    curl.multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl.multi_setopt(multi, CURLMOPT_SOCKETDATA, this);
    curl.multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl.multi_setopt(multi, CURLMOPT_TIMERDATA, this);
  }
  ~Loop() {
    curl.multi_cleanup(multi);
    close(epoll_fd);
  }

  static int on_socket(CURL*, curl_socket_t socket, int what, void* user, void*) {
    auto* loop = static_cast<Loop*>(user);
    if (what == CURL_POLL_REMOVE) {
      epoll_ctl(loop->epoll_fd, EPOLL_CTL_DEL, socket, nullptr);
      return 0;
    }
    epoll_event event{};
    event.data.fd = socket;
    if (what & CURL_POLL_IN) event.events |= EPOLLIN;
    if (what & CURL_POLL_OUT) event.events |= EPOLLOUT;
    if (epoll_ctl(loop->epoll_fd, EPOLL_CTL_MOD, socket, &event) != 0 && errno == ENOENT)
      epoll_ctl(loop->epoll_fd, EPOLL_CTL_ADD, socket, &event);
    return 0;
  }

  static int on_timer(CURLM*, long timeout_ms, void* user) {
    auto* loop = static_cast<Loop*>(user);
    if (timeout_ms < 0)
      loop->timer_deadline.reset();
    else
      loop->timer_deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    return 0;
  }

  void socket_action(curl_socket_t socket, int flags) {
    int running = 0;
    curl.multi_socket_action(multi, socket, flags, &running);
  }
};

StreamClient::StreamClient(const CurlApi& curl, StreamTarget target)
    : curl_(curl), target_(std::move(target)), loop_(std::make_unique<Loop>(curl)) {}

StreamClient::~StreamClient() = default;

LoadRun StreamClient::run(const std::vector<std::string>& bodies, const LoadSchedule& schedule,
                          const std::function<void(const LoadProgress&)>& on_progress) {
  QINFER_CHECK(schedule.side_requests <= bodies.size() && schedule.side_max_in_flight >= 1, "bad side lane");
  const size_t num_main = bodies.size() - schedule.side_requests;
  QINFER_CHECK(schedule.arrivals_s.empty() || schedule.arrivals_s.size() == num_main, "one arrival per body");
  curl_slist* headers = nullptr;
  headers = curl_.slist_append(headers, "Content-Type: application/json");
  headers = curl_.slist_append(headers, "Accept: text/event-stream");
  headers = curl_.slist_append(headers, "Expect:");  // no 100-continue round trip before large bodies
  if (!target_.api_key.empty())
    headers = curl_.slist_append(headers, ("Authorization: Bearer " + target_.api_key).c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers_owner(headers, curl_.slist_free_all);

  ensure_open_file_limit((schedule.max_in_flight > 0 ? static_cast<size_t>(schedule.max_in_flight) : num_main) +
                         std::min(schedule.side_requests, static_cast<size_t>(schedule.side_max_in_flight)));
  LoadRun result;
  result.records.resize(bodies.size());
  std::vector<std::unique_ptr<Transfer>> transfers(bodies.size());
  LoadProgress progress;
  size_t next = 0;              // of the main bodies
  size_t next_side = num_main;  // of the side lane's
  int in_flight = 0;            // main bodies
  int side_in_flight = 0;
  const Clock::time_point start = Clock::now();
  const double cpu_start = thread_cpu_seconds();
  Clock::time_point last_progress = start;

  const auto since_start = [&start](Clock::time_point t) { return std::chrono::duration<double>(t - start).count(); };
  const auto start_transfer = [&](size_t i) {
    auto t = std::make_unique<Transfer>();
    t->curl = &curl_;
    t->easy = curl_.easy_init();
    QINFER_CHECK(t->easy != nullptr, "curl_easy_init failed");
    t->index = i;
    t->progress = &progress;
    CURL* e = t->easy;
    curl_.easy_setopt(e, CURLOPT_URL, target_.url.c_str());
    curl_.easy_setopt(e, CURLOPT_HTTPHEADER, headers);
    curl_.easy_setopt(e, CURLOPT_POSTFIELDS, bodies[i].data());
    curl_.easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(bodies[i].size()));
    curl_.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_.easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    curl_.easy_setopt(e, CURLOPT_PRIVATE, t.get());
    curl_.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_.easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(target_.request_timeout_seconds * 1000));
    t->sent = Clock::now();
    t->record.start_s = since_start(t->sent);
    curl_.multi_add_handle(loop_->multi, e);
    transfers[i] = std::move(t);
    ++(i < num_main ? in_flight : side_in_flight);
    ++progress.started;
    result.peak_in_flight = std::max(result.peak_in_flight, in_flight + side_in_flight);
  };
  const auto finish_transfer = [&](CURL* easy, CURLcode code) {
    Transfer* t = nullptr;
    curl_.easy_getinfo(easy, CURLINFO_PRIVATE, &t);
    if (t->status == 0) curl_.easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &t->status);
    RequestRecord& r = t->record;
    r.latency_s = std::chrono::duration<double>(Clock::now() - t->sent).count();
    if (code != CURLE_OK) {
      r.error_kind = error_kind_of(code);
      r.error_message = curl_.easy_strerror(code);
    } else if (t->status != 200) {
      r.error_kind = "http_" + std::to_string(t->status);
      r.error_message = t->error_body;
    } else if (r.error_kind.empty() && !t->done_seen) {
      r.error_kind = kErrorDisconnect;
      r.error_message = t->sse.has_partial_event() ? "stream ended inside an event" : "stream ended before [DONE]";
    }
    curl_.multi_remove_handle(loop_->multi, easy);
    curl_.easy_cleanup(easy);
    if (!r.ok()) ++progress.failed;
    ++progress.finished;
    --(t->index < num_main ? in_flight : side_in_flight);
    result.records[t->index] = std::move(r);
    transfers[t->index].reset();
  };

  std::array<epoll_event, 256> events;
  while (progress.finished < static_cast<int>(bodies.size())) {
    Clock::time_point now = Clock::now();
    while (next < num_main && (schedule.max_in_flight <= 0 || in_flight < schedule.max_in_flight) &&
           (schedule.arrivals_s.empty() || schedule.arrivals_s[next] <= since_start(now)))
      start_transfer(next++);
    while (next_side < bodies.size() && side_in_flight < schedule.side_max_in_flight) start_transfer(next_side++);

    // Sleep until a socket is ready, libcurl's timer, the next arrival or the next progress report.
    Clock::time_point wake = last_progress + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(kProgressIntervalSeconds));
    if (loop_->timer_deadline) wake = std::min(wake, *loop_->timer_deadline);
    if (next < num_main && !schedule.arrivals_s.empty() &&
        (schedule.max_in_flight <= 0 || in_flight < schedule.max_in_flight))
      wake = std::min(wake, start + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(schedule.arrivals_s[next])));
    const auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
    const int ready = epoll_wait(loop_->epoll_fd, events.data(), static_cast<int>(events.size()),
                                 static_cast<int>(std::max<int64_t>(0, wait_ms)));
    for (int i = 0; i < ready; ++i) {
      int flags = 0;
      if (events[i].events & (EPOLLIN | EPOLLHUP)) flags |= CURL_CSELECT_IN;
      if (events[i].events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
      if (events[i].events & EPOLLERR) flags |= CURL_CSELECT_ERR;
      loop_->socket_action(events[i].data.fd, flags);
    }
    now = Clock::now();
    if (loop_->timer_deadline && *loop_->timer_deadline <= now) {
      loop_->timer_deadline.reset();
      loop_->socket_action(CURL_SOCKET_TIMEOUT, 0);
    }
    int queued = 0;
    while (CURLMsg* message = curl_.multi_info_read(loop_->multi, &queued))
      if (message->msg == CURLMSG_DONE) finish_transfer(message->easy_handle, message->data.result);

    now = Clock::now();
    if (now - last_progress >= std::chrono::duration<double>(kProgressIntervalSeconds)) {
      last_progress = now;
      progress.elapsed_s = since_start(now);
      if (on_progress) on_progress(progress);
    }
  }
  result.duration_s = since_start(Clock::now());
  result.client_cpu_seconds = thread_cpu_seconds() - cpu_start;
  progress.elapsed_s = result.duration_s;
  if (on_progress) on_progress(progress);
  return result;
}

}  // namespace qinfer::loadgen
