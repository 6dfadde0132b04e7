// libcurl, loaded at run time (dlopen of libcurl.so.4) instead of linked: `qinfer serve` of a local model then runs on
// machines without libcurl (the release tarball carries only the binary), and only the commands that talk HTTP as a
// client need it: `bench serve` (loadgen/) and model downloads (hub/). Compiled against Debian's libcurl4-openssl-dev
// headers; the ABI of libcurl.so.4 is stable across distributions.
#pragma once

#include <curl/curl.h>

namespace qinfer {

// The libcurl functions qinfer uses, by their C names without the `curl_` prefix.
struct CurlApi {
  decltype(&curl_global_init) global_init = nullptr;
  decltype(&curl_global_cleanup) global_cleanup = nullptr;
  decltype(&curl_easy_init) easy_init = nullptr;
  decltype(&curl_easy_cleanup) easy_cleanup = nullptr;
  decltype(&curl_easy_setopt) easy_setopt = nullptr;
  decltype(&curl_easy_getinfo) easy_getinfo = nullptr;
  decltype(&curl_easy_perform) easy_perform = nullptr;
  decltype(&curl_easy_strerror) easy_strerror = nullptr;
  decltype(&curl_easy_escape) easy_escape = nullptr;
  decltype(&curl_free) free = nullptr;
  decltype(&curl_slist_append) slist_append = nullptr;
  decltype(&curl_slist_free_all) slist_free_all = nullptr;
  decltype(&curl_multi_init) multi_init = nullptr;
  decltype(&curl_multi_cleanup) multi_cleanup = nullptr;
  decltype(&curl_multi_setopt) multi_setopt = nullptr;
  decltype(&curl_multi_add_handle) multi_add_handle = nullptr;
  decltype(&curl_multi_remove_handle) multi_remove_handle = nullptr;
  decltype(&curl_multi_socket_action) multi_socket_action = nullptr;
  decltype(&curl_multi_info_read) multi_info_read = nullptr;
};

// Loads libcurl and runs curl_global_init; create one before any other thread uses curl, keep it while curl is used.
// Throws Error(kUnavailable) naming the library and the package to install when libcurl cannot be loaded; `purpose`
// says which command needed it ("bench serve", "downloading a model").
class CurlSession {
 public:
  explicit CurlSession(const char* purpose);
  ~CurlSession();
  CurlSession(const CurlSession&) = delete;
  CurlSession& operator=(const CurlSession&) = delete;

  const CurlApi& api() const { return api_; }

 private:
  void* library_ = nullptr;  // dlopen handle
  CurlApi api_;
};

}  // namespace qinfer
