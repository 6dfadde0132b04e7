#include "loadgen/http_get.h"

#include <curl/curl.h>

#include <memory>

#include "util/error.h"

namespace qinfer::loadgen {

CurlSession::CurlSession() {
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw Error(ErrorKind::kInternal, "curl_global_init failed");
}

CurlSession::~CurlSession() { curl_global_cleanup(); }

namespace {

size_t append_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

}  // namespace

HttpResponse http_get(const std::string& url, const std::string& api_key, double timeout_seconds) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl_easy_init(), curl_easy_cleanup);
  QINFER_CHECK(easy != nullptr, "curl_easy_init failed");
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(nullptr, curl_slist_free_all);
  if (!api_key.empty()) headers.reset(curl_slist_append(nullptr, ("Authorization: Bearer " + api_key).c_str()));
  HttpResponse response;
  curl_easy_setopt(easy.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy.get(), CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(easy.get(), CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_seconds * 1000));
  curl_easy_setopt(easy.get(), CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy.get(), CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(easy.get(), CURLOPT_WRITEDATA, &response.body);
  const CURLcode code = curl_easy_perform(easy.get());
  if (code != CURLE_OK) {
    response.error = curl_easy_strerror(code);
    return response;
  }
  curl_easy_getinfo(easy.get(), CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

}  // namespace qinfer::loadgen
