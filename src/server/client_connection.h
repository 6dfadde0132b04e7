// The socket a request arrived on: to notice a client that closed its connection while its non-streamed request waits
// for the engine, and to hand a streamed response's socket to the SSE writer (sse_writer.h).
//
// cpp-httplib 0.11 does not hand handlers their socket, so the socket is found by the connection's four addresses,
// which identify one TCP connection (getsockname/getpeername over this process's descriptors). ConnectionDirectory
// remembers the sockets of its last scan of /proc/self/fd by peer port, so that a server with a thousand open
// connections does not scan them all for every streamed request; a miss scans again. A closed peer is
// seen with a non-blocking recv(MSG_PEEK): 0 bytes (FIN) or a reset. A client that half-closes its sending side
// after the request (shutdown(SHUT_WR)) therefore looks gone; HTTP clients do not do that.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace httplib {
struct Request;
}

namespace qinfer::server {

class ClientConnection {
 public:
  // True once the peer closed or reset the connection. Never blocks, never consumes data.
  bool closed_by_peer() const;
  int socket() const { return socket_; }

 private:
  friend class ConnectionDirectory;
  explicit ClientConnection(int socket) : socket_(socket) {}
  int socket_;  // owned by cpp-httplib's connection thread, which is the thread calling us
};

// Thread-safe; owned by ServerState.
class ConnectionDirectory {
 public:
  // The socket `request` arrived on; nullopt when it cannot be found (then nothing is watched). Usually a few system
  // calls; O(open descriptors) when the connection was accepted after the last scan.
  std::optional<ClientConnection> find(const httplib::Request& request);

 private:
  void rescan();  // caller holds mutex_

  std::mutex mutex_;
  std::unordered_multimap<int, int> sockets_by_peer_port_;  // as of the last scan; checked before use
};

}  // namespace qinfer::server
