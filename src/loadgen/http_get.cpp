#include "loadgen/http_get.h"

#include <memory>

#include "util/error.h"

namespace qinfer::loadgen {

namespace {

size_t append_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

}  // namespace

HttpResponse http_get(const CurlApi& curl, const std::string& url, const std::string& api_key, double timeout_seconds) {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> easy(curl.easy_init(), curl.easy_cleanup);
  QINFER_CHECK(easy != nullptr, "curl_easy_init failed");
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(nullptr, curl.slist_free_all);
  if (!api_key.empty()) headers.reset(curl.slist_append(nullptr, ("Authorization: Bearer " + api_key).c_str()));
  HttpResponse response;
  curl.easy_setopt(easy.get(), CURLOPT_URL, url.c_str());
  curl.easy_setopt(easy.get(), CURLOPT_HTTPHEADER, headers.get());
  curl.easy_setopt(easy.get(), CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_seconds * 1000));
  curl.easy_setopt(easy.get(), CURLOPT_NOSIGNAL, 1L);
  curl.easy_setopt(easy.get(), CURLOPT_WRITEFUNCTION, append_body);
  curl.easy_setopt(easy.get(), CURLOPT_WRITEDATA, &response.body);
  const CURLcode code = curl.easy_perform(easy.get());
  if (code != CURLE_OK) {
    response.error = curl.easy_strerror(code);
    return response;
  }
  curl.easy_getinfo(easy.get(), CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

}  // namespace qinfer::loadgen
