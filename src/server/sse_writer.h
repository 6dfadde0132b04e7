// One event-loop thread that writes every streamed (SSE) response, instead of each connection thread waking per token.
//
// cpp-httplib still parses the request, routes it and sends the response headers on its connection thread. For a
// stream the connection thread then hands its socket to the writer (SseWriter::write) and sleeps until the stream is
// over. The writer thread waits in epoll on
//   - an eventfd: "channels have new output" (Channel::notify, called by the engine thread after each push; one engine
//     step wakes the writer once for all of its streams),
//   - the stream sockets: EPOLLRDHUP/EPOLLHUP/EPOLLERR always (a vanished client is noticed without a write), EPOLLOUT
//     only while bytes are pending,
//   - a 100 ms tick: keep-alive comments on idle streams, and the write timeout.
// Each drain of a stream's source becomes one HTTP/1.1 chunk (`<hex size>\r\n<data>\r\n`, the framing of httplib's
// DataSink), sent with MSG_DONTWAIT; what the kernel does not take waits for EPOLLOUT. The terminating zero chunk is
// the connection thread's (httplib's sink.done()), so that httplib keeps the connection alive as usual.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace qinfer::server {

// A streamed response's events, as the writer drains them. Called on the writer thread only, one call at a time.
class SseSource {
 public:
  virtual ~SseSource() = default;
  // Appends the SSE events that are ready to `out` without blocking; returns true once the last one was appended.
  virtual bool take_events(std::string& out) = 0;
};

class SseWriter {
 public:
  // An SSE comment on a stream with nothing written for this long: clients ignore it, proxies keep the connection.
  static constexpr std::chrono::milliseconds kKeepAliveInterval{1000};
  static constexpr std::string_view kKeepAliveComment = ": keep-alive\n\n";
  static constexpr std::chrono::milliseconds kTickInterval{100};

  // One streamed response's link to the writer. Opened before the engine request exists, so that the engine's
  // output callback can call notify() from the first delta on.
  class Channel : public std::enable_shared_from_this<Channel> {
   public:
    // Any thread; cheap: an atomic exchange, then only for a channel not queued yet a lock and a push, and an eventfd
    // write only when the ready list was empty (one per engine step, however many streams).
    void notify();

   private:
    friend class SseWriter;
    struct Shared;
    explicit Channel(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

    std::shared_ptr<Shared> shared_;
    std::atomic<bool> queued_{false};  // in the writer's ready list
    std::promise<bool> outcome_;       // set by the writer: true when every byte of the finished source was sent

    // Writer thread only.
    int socket_ = -1;
    SseSource* source_ = nullptr;
    std::string pending_;  // framed chunks not yet taken by the kernel
    size_t sent_ = 0;      // bytes of pending_ already sent
    bool source_finished_ = false;
    bool over_ = false;                                    // outcome set
    bool waiting_writable_ = false;                        // EPOLLOUT registered
    std::chrono::steady_clock::time_point last_progress_;  // last byte sent (or attach)
  };

  // Starts the writer thread. A client that takes no byte for `write_timeout` while bytes are pending is dropped.
  explicit SseWriter(std::chrono::milliseconds write_timeout);
  ~SseWriter();  // streams still being written fail
  SseWriter(const SseWriter&) = delete;
  SseWriter& operator=(const SseWriter&) = delete;

  std::shared_ptr<Channel> open_channel();

  // Connection thread, after the response headers went out on `socket` (blocking or not; the writer never blocks on
  // it and does not close it): writes `source`'s events as chunks until the source is finished and every byte was
  // sent (true: the terminating chunk is the caller's), or until the client hung up, a send failed or the write
  // timeout passed (false). Blocks until then. `source` must stay valid until this returns.
  bool write(const std::shared_ptr<Channel>& channel, int socket, SseSource& source);

 private:
  using Clock = std::chrono::steady_clock;

  void loop();
  void take_queued(std::vector<std::shared_ptr<Channel>>& attaching, std::vector<std::shared_ptr<Channel>>& ready);
  void attach(const std::shared_ptr<Channel>& channel);
  void drain_source(Channel& channel);
  void flush(Channel& channel);
  void tick(Clock::time_point now);
  void finish(Channel& channel, bool delivered);
  void watch(Channel& channel, bool writable);

  const std::chrono::milliseconds write_timeout_;
  std::shared_ptr<Channel::Shared> shared_;
  int epoll_ = -1;
  std::string chunk_body_;                                           // writer thread: reused for every drain
  std::unordered_map<Channel*, std::shared_ptr<Channel>> attached_;  // writer thread only
  std::vector<Channel*> finished_;                                   // over in this loop iteration, still in attached_
  std::thread thread_;
};

}  // namespace qinfer::server
