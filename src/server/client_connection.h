// The socket a request arrived on: to notice a client that closed its connection while its non-streamed request waits
// for the engine, and to hand a streamed response's socket to the SSE writer (sse_writer.h).
//
// cpp-httplib 0.11 does not hand handlers their socket, so the socket is found by the connection's four addresses,
// which identify one TCP connection (getsockname/getpeername over this process's descriptors). A closed peer is
// seen with a non-blocking recv(MSG_PEEK): 0 bytes (FIN) or a reset. A client that half-closes its sending side
// after the request (shutdown(SHUT_WR)) therefore looks gone; HTTP clients do not do that.
#pragma once

#include <optional>
#include <string>

namespace httplib {
struct Request;
}

namespace qinfer::server {

class ClientConnection {
 public:
  // The socket `request` arrived on; nullopt when it cannot be found (then nothing is watched). Scans the open
  // descriptors once: O(open descriptors) system calls.
  static std::optional<ClientConnection> of(const httplib::Request& request);

  // True once the peer closed or reset the connection. Never blocks, never consumes data.
  bool closed_by_peer() const;
  int socket() const { return socket_; }

 private:
  explicit ClientConnection(int socket) : socket_(socket) {}
  int socket_;  // owned by cpp-httplib's connection thread, which is the thread calling us
};

}  // namespace qinfer::server
