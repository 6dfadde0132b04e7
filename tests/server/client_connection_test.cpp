// ConnectionDirectory against real loopback TCP connections: it finds the socket a request arrived on by the
// connection's addresses, also for connections accepted after its last scan, and never returns a descriptor that
// now belongs to another connection.
#include "server/client_connection.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace qinfer::server {
namespace {

int port_of(int fd, bool peer) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  if (peer)
    getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length);
  else
    getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    EXPECT_EQ(listen(fd_, 8), 0);
  }
  ~Listener() { close(fd_); }

  // A new connection: {accepted (server side), client side}.
  std::pair<int, int> connect_one() const {
    sockaddr_in address{};
    socklen_t length = sizeof address;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    const int client = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&address), length), 0);
    return {accept(fd_, nullptr, nullptr), client};
  }

 private:
  int fd_ = -1;
};

// What cpp-httplib fills in for a request on the server side of `accepted`.
httplib::Request request_on(int accepted) {
  httplib::Request request;
  request.remote_addr = "127.0.0.1";
  request.remote_port = port_of(accepted, true);
  request.local_addr = "127.0.0.1";
  request.local_port = port_of(accepted, false);
  return request;
}

TEST(ConnectionDirectory, FindsConnectionsAcceptedBeforeAndAfterItsLastScan) {
  Listener listener;
  ConnectionDirectory directory;
  const auto [first, first_client] = listener.connect_one();
  std::optional<ClientConnection> found = directory.find(request_on(first));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->socket(), first);
  const auto [second, second_client] = listener.connect_one();
  found = directory.find(request_on(second));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->socket(), second);
  found = directory.find(request_on(first));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->socket(), first);
  EXPECT_FALSE(found->closed_by_peer());
  close(first_client);
  EXPECT_TRUE(found->closed_by_peer());
  for (int fd : {first, second, second_client}) close(fd);
}

TEST(ConnectionDirectory, AReusedDescriptorIsNotMistakenForTheOldConnection) {
  Listener listener;
  ConnectionDirectory directory;
  const auto [old_socket, old_client] = listener.connect_one();
  const httplib::Request old_request = request_on(old_socket);
  ASSERT_TRUE(directory.find(old_request));
  close(old_socket);
  close(old_client);
  const auto [new_socket, new_client] = listener.connect_one();  // usually gets the old descriptor numbers back
  EXPECT_FALSE(directory.find(old_request));
  std::optional<ClientConnection> found = directory.find(request_on(new_socket));
  ASSERT_TRUE(found);
  EXPECT_EQ(found->socket(), new_socket);
  close(new_socket);
  close(new_client);
}

}  // namespace
}  // namespace qinfer::server
