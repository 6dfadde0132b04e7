#include "util/http_request.h"

#include <algorithm>
#include <cctype>
#include <memory>

#include "util/error.h"

namespace qinfer {

namespace {

struct Transfer {
  const CurlApi& curl;
  CURL* easy;
  const HttpRequest& request;
  HttpResponse& response;
};

bool is_success(long status) { return status >= 200 && status < 300; }

size_t on_write(char* data, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  long status = 0;
  t.curl.easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &status);
  if (t.request.on_body && is_success(status)) return t.request.on_body(status, data, bytes) ? bytes : 0;
  t.response.body.append(data, bytes);
  return bytes;
}

std::string trim(std::string s) {
  auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), space));
  s.erase(std::find_if_not(s.rbegin(), s.rend(), space).base(), s.end());
  return s;
}

// Called once per header line of every response, redirects included: a status line starts a new header set.
size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const std::string line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    t.response.headers.clear();
    return line.size();
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return line.size();
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  t.response.headers.emplace_back(std::move(name), trim(line.substr(colon + 1)));
  return line.size();
}

}  // namespace

const std::string& HttpResponse::header(const std::string& name) const {
  static const std::string kEmpty;
  for (const auto& [key, value] : headers)
    if (key == name) return value;
  return kEmpty;
}

HttpResponse http_request(const CurlApi& curl, const HttpRequest& request) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl.easy_init(), curl.easy_cleanup);
  QINFER_CHECK(easy != nullptr, "curl_easy_init failed");
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(nullptr, curl.slist_free_all);
  for (const std::string& line : request.headers) {
    curl_slist* appended = curl.slist_append(headers.get(), line.c_str());
    QINFER_CHECK(appended != nullptr, "curl_slist_append failed");
    headers.release();
    headers.reset(appended);
  }
  HttpResponse response;
  Transfer transfer{curl, easy.get(), request, response};
  CURL* e = easy.get();
  curl.easy_setopt(e, CURLOPT_URL, request.url.c_str());
  curl.easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
  curl.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  if (request.head) curl.easy_setopt(e, CURLOPT_NOBODY, 1L);
  curl.easy_setopt(e, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
  curl.easy_setopt(e, CURLOPT_MAXREDIRS, 10L);
  if (request.timeout_seconds > 0)
    curl.easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(request.timeout_seconds * 1000));
  curl.easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(request.connect_timeout_seconds * 1000));
  if (request.stall_timeout_seconds > 0) {
    curl.easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl.easy_setopt(e, CURLOPT_LOW_SPEED_TIME, static_cast<long>(request.stall_timeout_seconds));
  }
  curl.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl.easy_setopt(e, CURLOPT_WRITEDATA, &transfer);
  curl.easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl.easy_setopt(e, CURLOPT_HEADERDATA, &transfer);
  response.code = curl.easy_perform(e);
  curl.easy_getinfo(e, CURLINFO_RESPONSE_CODE, &response.status);
  if (response.code != CURLE_OK) response.error = curl.easy_strerror(response.code);
  return response;
}

std::string url_escape(const CurlApi& curl, const std::string& text) {
  char* escaped = curl.easy_escape(nullptr, text.c_str(), static_cast<int>(text.size()));
  QINFER_CHECK(escaped != nullptr, "curl_easy_escape failed");
  std::string out(escaped);
  curl.free(escaped);
  return out;
}

}  // namespace qinfer
