// SseWriter over real loopback TCP connections: chunk framing, back-pressure (a client that stops reading until the
// send buffer is full), hang-ups without a pending write, the write timeout, keep-alive comments.
#include "server/sse_writer.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <future>

namespace qinfer::server {
namespace {

using namespace std::chrono_literals;

// A connected loopback TCP pair with small buffers, so that a few hundred KB fill them.
struct SocketPair {
  int server = -1;  // the side the writer writes to
  int client = -1;

  SocketPair() {
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(listen(listener, 1), 0);
    EXPECT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
    client = socket(AF_INET, SOCK_STREAM, 0);
    const int small = 4096;
    setsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), length), 0);
    server = accept(listener, nullptr, nullptr);
    setsockopt(server, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    close(listener);
  }
  ~SocketPair() {
    if (server >= 0) close(server);
    if (client >= 0) close(client);
  }
};

// Events handed over by the test thread.
class ScriptedSource : public SseSource {
 public:
  void push(std::string events, bool last) {
    std::lock_guard lock(mutex_);
    queued_ += events;
    finished_ = finished_ || last;
  }
  bool take_events(std::string& out) override {
    std::lock_guard lock(mutex_);
    out += queued_;
    queued_.clear();
    return finished_;
  }

 private:
  std::mutex mutex_;
  std::string queued_;
  bool finished_ = false;
};

// Reads until the peer has sent `bytes` bytes or `timeout` passes without data.
std::string read_some(int fd, size_t bytes, std::chrono::milliseconds timeout) {
  std::string received;
  char buffer[65536];
  while (received.size() < bytes) {
    pollfd readable{fd, POLLIN, 0};
    if (poll(&readable, 1, static_cast<int>(timeout.count())) <= 0) break;
    const ssize_t got = read(fd, buffer, sizeof buffer);
    if (got <= 0) break;
    received.append(buffer, static_cast<size_t>(got));
  }
  return received;
}

// Decodes HTTP/1.1 chunked framing (RFC 9112 §7.1, without extensions or trailers); fails the test on bad framing.
std::string unchunk(const std::string& wire) {
  std::string body;
  size_t pos = 0;
  while (pos < wire.size()) {
    const size_t line_end = wire.find("\r\n", pos);
    EXPECT_NE(line_end, std::string::npos) << "chunk size line without CRLF at " << pos;
    if (line_end == std::string::npos) break;
    const std::string hex = wire.substr(pos, line_end - pos);
    EXPECT_FALSE(hex.empty());
    EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos) << hex;
    const size_t size = std::stoul(hex, nullptr, 16);
    EXPECT_GT(size, 0u) << "the writer must not send the terminating chunk";
    EXPECT_LE(line_end + 2 + size + 2, wire.size()) << "truncated chunk";
    body += wire.substr(line_end + 2, size);
    EXPECT_EQ(wire.substr(line_end + 2 + size, 2), "\r\n");
    pos = line_end + 2 + size + 2;
  }
  return body;
}

std::string numbered_events(int from, int to) {
  std::string events;
  for (int i = from; i < to; ++i)
    events += "data: {\"n\": " + std::to_string(i) + ", \"pad\": \"" + std::string(200, 'x') + "\"}\n\n";
  return events;
}

TEST(SseWriter, ClientThatStopsReadingUntilTheBufferIsFullGetsEveryByteInOrder) {
  SseWriter writer(10s);
  SocketPair pair;
  ScriptedSource source;
  auto channel = writer.open_channel();
  std::string expected = numbered_events(0, 2000);  // ~450 KB, far more than both socket buffers
  source.push(expected, false);
  auto delivered = std::async(std::launch::async, [&] { return writer.write(channel, pair.server, source); });
  // Not reading: the writer must be left with pending bytes, not finished and not failed.
  EXPECT_EQ(delivered.wait_for(300ms), std::future_status::timeout);
  const std::string more = numbered_events(2000, 2100);
  source.push(more, true);
  channel->notify();
  expected += more;
  std::string wire = read_some(pair.client, std::numeric_limits<size_t>::max(), 1000ms);
  ASSERT_EQ(delivered.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(delivered.get());
  EXPECT_EQ(unchunk(wire), expected);
}

TEST(SseWriter, NotifyBeforeTheHandOverIsNotLost) {
  SseWriter writer(10s);
  SocketPair pair;
  ScriptedSource source;
  auto channel = writer.open_channel();
  source.push("data: early\n\n", false);
  channel->notify();
  std::this_thread::sleep_for(50ms);  // the writer takes the notification while nothing is attached
  auto delivered = std::async(std::launch::async, [&] { return writer.write(channel, pair.server, source); });
  const std::string first = read_some(pair.client, 1, 2000ms);
  EXPECT_EQ(unchunk(first), "data: early\n\n");
  source.push("data: [DONE]\n\n", true);
  channel->notify();
  ASSERT_EQ(delivered.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(delivered.get());
  EXPECT_EQ(unchunk(read_some(pair.client, 1, 1000ms)), "data: [DONE]\n\n");
}

TEST(SseWriter, HangUpWithoutAPendingWriteIsNoticedBeforeAnyKeepAlive) {
  SseWriter writer(10s);
  SocketPair pair;
  ScriptedSource source;  // never produces anything
  auto channel = writer.open_channel();
  auto delivered = std::async(std::launch::async, [&] { return writer.write(channel, pair.server, source); });
  std::this_thread::sleep_for(100ms);
  const auto closed = std::chrono::steady_clock::now();
  close(pair.client);
  pair.client = -1;
  ASSERT_EQ(delivered.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(delivered.get());
  // No write was pending and the first keep-alive is due only after a second: the hang-up itself was seen.
  EXPECT_LT(std::chrono::steady_clock::now() - closed, SseWriter::kKeepAliveInterval);
}

TEST(SseWriter, ClientSlowerThanTheWriteTimeoutIsDropped) {
  SseWriter writer(300ms);
  SocketPair pair;
  ScriptedSource source;
  auto channel = writer.open_channel();
  source.push(numbered_events(0, 2000), true);
  auto delivered = std::async(std::launch::async, [&] { return writer.write(channel, pair.server, source); });
  ASSERT_EQ(delivered.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(delivered.get());
}

TEST(SseWriter, IdleStreamGetsKeepAliveComments) {
  SseWriter writer(10s);
  SocketPair pair;
  ScriptedSource source;
  auto channel = writer.open_channel();
  auto delivered = std::async(std::launch::async, [&] { return writer.write(channel, pair.server, source); });
  const std::string wire = read_some(pair.client, 1, SseWriter::kKeepAliveInterval + 1000ms);
  EXPECT_EQ(unchunk(wire), ": keep-alive\n\n");
  source.push("data: [DONE]\n\n", true);
  channel->notify();
  ASSERT_EQ(delivered.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(delivered.get());
}

TEST(SseWriter, StreamsStillBeingWrittenFailWhenTheWriterStops) {
  SocketPair pair;
  ScriptedSource source;
  std::shared_ptr<SseWriter::Channel> channel;
  std::future<bool> delivered;
  {
    SseWriter writer(10s);
    channel = writer.open_channel();
    delivered = std::async(std::launch::async, [&] { return writer.write(channel, pair.server, source); });
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(delivered.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(delivered.get());
  channel->notify();  // the engine may still report output after the server is gone: harmless
}

}  // namespace
}  // namespace qinfer::server
