// StreamClient against an in-process Boost.Beast server that streams, fails and hangs on purpose: token events and
// usage are measured, every error kind is classified, the concurrency cap, arrival times and the side lane hold.
#include "loadgen/stream_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "util/curl_api.h"

namespace qinfer::loadgen {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

constexpr int kTokens = 5;

// Serves /v1/completions; the prompt picks the behaviour. Blocking Beast, one thread per connection (a test fixture).
class FakeServer {
 public:
  FakeServer() : acceptor_(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)) {
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] {
      for (;;) {
        tcp::socket socket(io_);
        beast::error_code error;
        acceptor_.accept(socket, error);
        if (error || stopping_) return;
        connections_.emplace_back([socket = std::move(socket)]() mutable { serve(socket); });
      }
    });
  }
  ~FakeServer() {
    stopping_ = true;
    net::io_context wake;
    tcp::socket poke(wake);
    beast::error_code ignored;
    poke.connect(acceptor_.local_endpoint(), ignored);
    thread_.join();
    for (std::thread& connection : connections_) connection.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/completions"; }

 private:
  static void serve(tcp::socket& socket) {
    beast::flat_buffer buffer;
    beast::error_code error;
    for (;;) {
      http::request<http::string_body> request;
      http::read(socket, buffer, request, error);
      if (error) return;
      const std::string prompt = nlohmann::json::parse(request.body()).at("prompt");
      if (prompt == "http503") {
        http::response<http::string_body> response(http::status::service_unavailable, 11);
        response.set(http::field::content_type, "application/json");
        response.body() = R"({"error":{"message":"busy"}})";
        response.prepare_payload();
        http::write(socket, response, error);
        if (error) return;
        continue;
      }
      http::response<http::empty_body> head(http::status::ok, 11);
      head.set(http::field::content_type, "text/event-stream");
      head.chunked(true);
      http::response_serializer<http::empty_body> serializer(head);
      http::write_header(socket, serializer, error);
      auto send = [&](const std::string& data) { net::write(socket, http::make_chunk(net::buffer(data)), error); };
      if (prompt == "hang") std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      if (prompt == "slow") std::this_thread::sleep_for(std::chrono::milliseconds(400));
      const bool complete = prompt == "ok" || prompt == "slow";  // a whole stream with usage and [DONE]
      const std::string token = "data: {\"choices\":[{\"text\":\"t\"}]}\n\n";
      if (prompt == "stream_error") {
        send("data: {\"error\":{\"message\":\"engine died\"}}\n\ndata: [DONE]\n\n");
      } else {
        const int tokens = complete ? kTokens : 2;
        for (int i = 0; i < tokens; ++i) {
          send(token);
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        if (prompt == "abort") return;  // the connection is dropped without the final chunk
        if (complete)
          send("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":5}}\n\ndata: [DONE]\n\n");
      }
      net::write(socket, http::make_chunk_last(), error);
      if (error) return;
    }
  }

  net::io_context io_;
  tcp::acceptor acceptor_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::vector<std::thread> connections_;
};

std::string body(const std::string& prompt) { return nlohmann::json{{"prompt", prompt}}.dump(); }

class StreamClientTest : public ::testing::Test {
 protected:
  CurlSession curl_{"the stream client test"};
  FakeServer server_;
};

TEST_F(StreamClientTest, MeasuresStreamsAndClassifiesErrors) {
  StreamClient client(curl_.api(), StreamTarget{.url = server_.url(), .api_key = "k", .request_timeout_seconds = 0.5});
  const std::vector<std::string> bodies = {body("ok"),    body("http503"),      body("truncate"),
                                           body("abort"), body("stream_error"), body("hang")};
  int progress_calls = 0;
  const LoadRun run = client.run(bodies, LoadSchedule{}, [&](const LoadProgress&) { ++progress_calls; });
  ASSERT_EQ(run.records.size(), bodies.size());
  const RequestRecord& ok = run.records[0];
  EXPECT_TRUE(ok.ok()) << ok.error_kind << ": " << ok.error_message;
  EXPECT_EQ(ok.text_arrivals_s.size(), static_cast<size_t>(kTokens));
  EXPECT_EQ(ok.usage_completion_tokens, kTokens);
  EXPECT_EQ(ok.usage_prompt_tokens, 3);
  EXPECT_GT(ok.text_arrivals_s.front(), 0);
  EXPECT_GE(ok.latency_s, ok.text_arrivals_s.back());
  EXPECT_EQ(run.records[1].error_kind, "http_503");
  EXPECT_NE(run.records[1].error_message.find("busy"), std::string::npos);
  EXPECT_EQ(run.records[2].error_kind, kErrorDisconnect);
  EXPECT_EQ(run.records[3].error_kind, kErrorDisconnect);
  EXPECT_EQ(run.records[4].error_kind, kErrorStream);
  EXPECT_NE(run.records[4].error_message.find("engine died"), std::string::npos);
  EXPECT_EQ(run.records[5].error_kind, kErrorTimeout);
  EXPECT_EQ(run.peak_in_flight, 6);
  EXPECT_GE(progress_calls, 1);
}

TEST_F(StreamClientTest, ConcurrencyCapAndArrivals) {
  StreamClient client(curl_.api(), StreamTarget{.url = server_.url(), .api_key = "", .request_timeout_seconds = 10});
  const std::vector<std::string> bodies(12, body("ok"));
  const LoadRun capped = client.run(
      bodies, LoadSchedule{.max_in_flight = 3, .arrivals_s = {}, .side_requests = 0, .side_max_in_flight = 1}, nullptr);
  EXPECT_EQ(capped.peak_in_flight, 3);
  for (const RequestRecord& r : capped.records) EXPECT_TRUE(r.ok()) << r.error_kind << ": " << r.error_message;

  const std::vector<double> arrivals = {0, 0.05, 0.1, 0.15};
  const LoadRun paced = client.run(
      std::vector<std::string>(4, body("ok")),
      LoadSchedule{.max_in_flight = 0, .arrivals_s = arrivals, .side_requests = 0, .side_max_in_flight = 1}, nullptr);
  for (size_t i = 0; i < arrivals.size(); ++i) EXPECT_GE(paced.records[i].start_s, arrivals[i]);
  EXPECT_GE(paced.duration_s, 0.15);
}

TEST_F(StreamClientTest, SideLaneRunsBesideTheCap) {
  StreamClient client(curl_.api(), StreamTarget{.url = server_.url(), .api_key = "", .request_timeout_seconds = 10});
  // Six short requests one at a time, and beside them two slow ones (0.4 s before the first token) in order.
  std::vector<std::string> bodies(6, body("ok"));
  bodies.push_back(body("slow"));
  bodies.push_back(body("slow"));
  const LoadRun run = client.run(
      bodies, LoadSchedule{.max_in_flight = 1, .arrivals_s = {}, .side_requests = 2, .side_max_in_flight = 1}, nullptr);
  for (const RequestRecord& r : run.records) EXPECT_TRUE(r.ok()) << r.error_kind << ": " << r.error_message;
  EXPECT_EQ(run.peak_in_flight, 2) << "one short and one slow request";
  const RequestRecord& first_slow = run.records[6];
  EXPECT_LT(first_slow.start_s, 0.1) << "the side lane starts with the run";
  for (size_t i = 0; i < 6; ++i)
    EXPECT_LT(run.records[i].start_s + run.records[i].latency_s, first_slow.start_s + first_slow.latency_s)
        << "short request " << i << " is not held behind the slow one";
  EXPECT_GE(run.records[7].start_s, first_slow.start_s + first_slow.latency_s) << "one side request at a time";
}

TEST(StreamClient, ConnectErrorWhenNothingListens) {
  CurlSession curl("the stream client test");
  // A port that was free a moment ago and has no listener: bound without listen(), then closed.
  const int probe = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  close(probe);
  StreamClient client(curl.api(), StreamTarget{.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/completions",
                                               .api_key = "",
                                               .request_timeout_seconds = 10});
  const LoadRun run = client.run({body("ok")}, LoadSchedule{}, nullptr);
  EXPECT_EQ(run.records[0].error_kind, kErrorConnect);
}

}  // namespace
}  // namespace qinfer::loadgen
