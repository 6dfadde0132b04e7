#include "server/client_connection.h"

#include <dirent.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <memory>

namespace qinfer::server {
namespace {

struct Endpoint {
  std::string address;  // numeric, as cpp-httplib writes Request::remote_addr / local_addr
  int port = -1;
};

std::optional<Endpoint> endpoint_of(const sockaddr_storage& address, socklen_t length) {
  char host[NI_MAXHOST];
  char service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof host, service, sizeof service,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return std::nullopt;
  return Endpoint{host, std::atoi(service)};
}

int port_of(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  return -1;
}

// Addresses are formatted only after the peer port matched.
bool is_connection(int fd, const httplib::Request& request) {
  sockaddr_storage peer{};
  socklen_t peer_length = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) return false;  // not a connected socket
  if (port_of(peer) != request.remote_port) return false;
  std::optional<Endpoint> peer_end = endpoint_of(peer, peer_length);
  if (!peer_end || peer_end->address != request.remote_addr) return false;
  sockaddr_storage local{};
  socklen_t local_length = sizeof local;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0) return false;
  std::optional<Endpoint> local_end = endpoint_of(local, local_length);
  return local_end && local_end->port == request.local_port && local_end->address == request.local_addr;
}

}  // namespace

std::optional<ClientConnection> ConnectionDirectory::find(const httplib::Request& request) {
  if (request.remote_port <= 0 || request.local_port <= 0) return std::nullopt;
  std::lock_guard lock(mutex_);
  for (bool scanned = false;; scanned = true) {
    const auto [first, last] = sockets_by_peer_port_.equal_range(request.remote_port);
    for (auto it = first; it != last; ++it)
      if (is_connection(it->second, request)) return ClientConnection(it->second);
    if (scanned) return std::nullopt;
    rescan();
  }
}

void ConnectionDirectory::rescan() {
  sockets_by_peer_port_.clear();
  std::unique_ptr<DIR, int (*)(DIR*)> descriptors(opendir("/proc/self/fd"), closedir);
  if (!descriptors) return;
  while (const dirent* entry = readdir(descriptors.get())) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(descriptors.get())) continue;
    sockaddr_storage peer{};
    socklen_t peer_length = sizeof peer;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) continue;
    if (const int port = port_of(peer); port >= 0) sockets_by_peer_port_.emplace(port, static_cast<int>(fd));
  }
}

bool ClientConnection::closed_by_peer() const {
  char byte = 0;
  const ssize_t got = recv(socket_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (got > 0) return false;  // the client sent more (a pipelined request): still there
  if (got == 0) return true;  // orderly close
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace qinfer::server
