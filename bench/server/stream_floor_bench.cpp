// A floor to hold server_bench's "HTTP CPU per streamed token" against: the least a server that wakes one thread per
// stream does per token. A writer thread waits on a condition variable for a token, polls the socket twice (zero
// timeout) and sends one ~236-byte chunk to a loopback TCP reader. Prints the writer's CPU per token. qinfer's HTTP
// layer (Boost.Beast on Asio event loops) does not wake a thread per stream: the engine thread posts the stream's
// handler to its event loop, which writes the chunk with one send and no polls; the loopback send, which runs the
// receiver's TCP path in the sender's context, is the part both pay.
// usage: stream_floor_bench [tokens]
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>

namespace {

double thread_cpu_us() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  const int tokens = argc > 1 ? std::atoi(argv[1]) : 5000;
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    return 1;
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  if (connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) return 1;
  const int server = accept(listener, nullptr, nullptr);
  const int one = 1;
  setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::thread reader([client] {
    char buffer[1 << 16];
    while (read(client, buffer, sizeof buffer) > 0) {
    }
  });

  std::mutex mutex;
  std::condition_variable ready;
  int pending = 0;
  int wakes = 0;
  double writer_cpu_us = 0;
  std::thread writer([&] {
    const std::string chunk = "e6\r\n" + std::string(230, 'x') + "\r\n";
    const double start = thread_cpu_us();
    for (int written = 0; written < tokens;) {
      {
        std::unique_lock lock(mutex);
        ready.wait(lock, [&] { return pending > 0; });
        written += pending;
        pending = 0;
      }
      ++wakes;
      pollfd writable{server, POLLOUT, 0};
      poll(&writable, 1, 0);
      poll(&writable, 1, 0);
      send(server, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    }
    writer_cpu_us = thread_cpu_us() - start;
  });
  for (int i = 0; i < tokens; ++i) {  // one token every 200 us, like an engine step per token
    {
      std::lock_guard lock(mutex);
      ++pending;
    }
    ready.notify_all();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  writer.join();
  shutdown(server, SHUT_WR);
  reader.join();
  std::printf("woken writer (condition variable wait, 2 polls, 1 loopback TCP send): %.2f us CPU per wake (%d wakes)\n",
              writer_cpu_us / wakes, wakes);
  return 0;
}
