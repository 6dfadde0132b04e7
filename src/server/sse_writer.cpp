#include "server/sse_writer.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "util/error.h"
#include "util/logging.h"

namespace qinfer::server {

// What notifying threads and the writer share. Outlives the writer while channels exist (the engine may still call
// notify() after the HTTP server is gone), so a late notify finds `stopping` instead of a closed eventfd.
struct SseWriter::Channel::Shared {
  std::mutex mutex;
  std::vector<std::shared_ptr<Channel>> ready;      // new output since the writer last drained them
  std::vector<std::shared_ptr<Channel>> attaching;  // handed over by connection threads
  bool stopping = false;
  int wakeup = -1;  // eventfd

  ~Shared() {
    if (wakeup >= 0) close(wakeup);
  }
  // Caller holds `mutex`.
  void wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(wakeup, &one, sizeof one);  // fails only when the counter is full
  }
};

namespace {

constexpr size_t kMaxChunkHeader = 2 * sizeof(size_t) + 2;  // hex digits + CRLF

// Appends `body` as one HTTP/1.1 chunk, framed like cpp-httplib's DataSink (lowercase hex size, no extensions).
void append_chunk(std::string& out, std::string_view body) {
  std::array<char, kMaxChunkHeader> header{};
  char* end = std::to_chars(header.data(), header.data() + header.size(), body.size(), 16).ptr;
  *end++ = '\r';
  *end++ = '\n';
  out.append(header.data(), end);
  out.append(body);
  out.append("\r\n");
}

}  // namespace

void SseWriter::Channel::notify() {
  if (queued_.exchange(true, std::memory_order_acq_rel)) return;  // already in the ready list
  std::lock_guard lock(shared_->mutex);
  if (shared_->stopping) return;
  const bool was_empty = shared_->ready.empty();
  shared_->ready.push_back(shared_from_this());  // keeps the channel alive until the writer took it
  if (was_empty) shared_->wake();
}

SseWriter::SseWriter(std::chrono::milliseconds write_timeout)
    : write_timeout_(write_timeout), shared_(std::make_shared<Channel::Shared>()) {
  shared_->wakeup = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  QINFER_CHECK(shared_->wakeup >= 0 && epoll_ >= 0, "SseWriter: eventfd/epoll_create1 failed");
  epoll_event wakeup_event{};
  wakeup_event.events = EPOLLIN;
  wakeup_event.data.ptr = nullptr;
  QINFER_CHECK(epoll_ctl(epoll_, EPOLL_CTL_ADD, shared_->wakeup, &wakeup_event) == 0, "SseWriter: epoll_ctl failed");
  thread_ = std::thread([this] { loop(); });
}

SseWriter::~SseWriter() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stopping = true;
    shared_->wake();
  }
  thread_.join();
  close(epoll_);
  std::lock_guard lock(shared_->mutex);
  shared_->ready.clear();  // they point back at shared_
}

std::shared_ptr<SseWriter::Channel> SseWriter::open_channel() { return std::shared_ptr<Channel>(new Channel(shared_)); }

bool SseWriter::write(const std::shared_ptr<Channel>& channel, int socket, SseSource& source) {
  std::future<bool> outcome = channel->outcome_.get_future();
  channel->socket_ = socket;
  channel->source_ = &source;
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->stopping) return false;
    shared_->attaching.push_back(channel);
    shared_->wake();
  }
  return outcome.get();
}

void SseWriter::take_queued(std::vector<std::shared_ptr<Channel>>& attaching,
                            std::vector<std::shared_ptr<Channel>>& ready) {
  uint64_t count = 0;
  [[maybe_unused]] const ssize_t got = read(shared_->wakeup, &count, sizeof count);
  std::lock_guard lock(shared_->mutex);
  attaching.swap(shared_->attaching);
  ready.swap(shared_->ready);
}

void SseWriter::loop() {
  std::vector<std::shared_ptr<Channel>> attaching;
  std::vector<std::shared_ptr<Channel>> ready;
  std::vector<epoll_event> events(256);
  auto next_tick = Clock::now() + kTickInterval;
  while (true) {
    const auto until_tick = std::chrono::ceil<std::chrono::milliseconds>(next_tick - Clock::now());
    const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()),
                             static_cast<int>(std::max<int64_t>(until_tick.count(), 0)));
    bool woken = false;
    for (int i = 0; i < n; ++i) {
      auto* channel = static_cast<Channel*>(events[static_cast<size_t>(i)].data.ptr);
      const uint32_t flags = events[static_cast<size_t>(i)].events;
      if (!channel) {
        woken = true;
      } else if (channel->over_) {
        continue;  // finished earlier in this batch
      } else if (flags & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) {
        finish(*channel, false);  // the client hung up (or reset): nobody reads the rest
      } else if (flags & EPOLLOUT) {
        flush(*channel);
      }
    }
    if (woken) {
      take_queued(attaching, ready);
      {
        std::lock_guard lock(shared_->mutex);
        if (shared_->stopping) break;
      }
      for (const std::shared_ptr<Channel>& channel : attaching) attach(channel);
      for (const std::shared_ptr<Channel>& queued : ready) {
        Channel* channel = queued.get();
        channel->queued_.store(false, std::memory_order_release);  // output pushed from now on queues it again
        if (attached_.count(channel) && !channel->over_) drain_source(*channel);
      }
      attaching.clear();
      ready.clear();
    }
    if (const auto now = Clock::now(); now >= next_tick) {
      tick(now);
      next_tick = now + kTickInterval;
    }
    // Dropped only now: events of this batch, the ready list and tick() may still point at them.
    for (Channel* channel : finished_) attached_.erase(channel);
    finished_.clear();
  }
  for (auto& [channel, owner] : attached_)
    if (!channel->over_) finish(*channel, false);
  for (const std::shared_ptr<Channel>& channel : attaching) channel->outcome_.set_value(false);
  attached_.clear();
}

void SseWriter::attach(const std::shared_ptr<Channel>& channel) {
  channel->last_progress_ = Clock::now();
  attached_.emplace(channel.get(), channel);
  epoll_event event{};
  event.events = EPOLLRDHUP;  // EPOLLHUP and EPOLLERR are always reported
  event.data.ptr = channel.get();
  if (epoll_ctl(epoll_, EPOLL_CTL_ADD, channel->socket_, &event) != 0) {
    spdlog::warn("SSE writer: cannot watch socket {}: {}", channel->socket_, std::strerror(errno));
    channel->over_ = true;
    finished_.push_back(channel.get());
    channel->outcome_.set_value(false);
    return;
  }
  drain_source(*channel);  // output queued before the hand-over
}

void SseWriter::drain_source(Channel& channel) {
  if (!channel.source_finished_) {
    chunk_body_.clear();
    channel.source_finished_ = channel.source_->take_events(chunk_body_);
    if (!chunk_body_.empty()) append_chunk(channel.pending_, chunk_body_);
  }
  flush(channel);
}

void SseWriter::flush(Channel& channel) {
  while (channel.sent_ < channel.pending_.size()) {
    const ssize_t n = send(channel.socket_, channel.pending_.data() + channel.sent_,
                           channel.pending_.size() - channel.sent_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      channel.sent_ += static_cast<size_t>(n);
      channel.last_progress_ = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!channel.waiting_writable_) watch(channel, true);
      return;
    }
    finish(channel, false);  // reset, broken pipe, ...
    return;
  }
  channel.pending_.clear();
  channel.sent_ = 0;
  if (channel.waiting_writable_) watch(channel, false);
  if (channel.source_finished_ && !channel.over_) finish(channel, true);
}

void SseWriter::watch(Channel& channel, bool writable) {
  epoll_event event{};
  event.events = EPOLLRDHUP | (writable ? EPOLLOUT : 0u);
  event.data.ptr = &channel;
  if (epoll_ctl(epoll_, EPOLL_CTL_MOD, channel.socket_, &event) != 0) {
    finish(channel, false);
    return;
  }
  channel.waiting_writable_ = writable;
}

void SseWriter::tick(Clock::time_point now) {
  for (auto& [channel, owner] : attached_) {
    if (channel->over_) continue;
    if (channel->sent_ < channel->pending_.size()) {
      if (now - channel->last_progress_ >= write_timeout_) {
        spdlog::info("SSE writer: a client took no byte for {} ms; dropping it", write_timeout_.count());
        finish(*channel, false);
      }
    } else if (now - channel->last_progress_ >= kKeepAliveInterval) {
      append_chunk(channel->pending_, kKeepAliveComment);
      flush(*channel);
    }
  }
}

void SseWriter::finish(Channel& channel, bool delivered) {
  if (channel.over_) return;
  channel.over_ = true;
  finished_.push_back(&channel);
  // Unwatched before the connection thread wakes up: it may close the socket right away.
  epoll_ctl(epoll_, EPOLL_CTL_DEL, channel.socket_, nullptr);
  channel.outcome_.set_value(delivered);
}

}  // namespace qinfer::server
