#include "util/curl_api.h"

#include <dlfcn.h>

#include <string>

#include "util/error.h"

namespace qinfer {

namespace {

constexpr const char* kLibraryName = "libcurl.so.4";

template <typename Function>
void resolve(void* library, const char* name, Function& out) {
  out = reinterpret_cast<Function>(dlsym(library, name));
  if (!out) throw Error(ErrorKind::kUnavailable, std::string(kLibraryName) + " has no symbol " + name);
}

}  // namespace

CurlSession::CurlSession(const char* purpose) {
  library_ = dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL);
  if (!library_)
    throw Error(ErrorKind::kUnavailable, std::string(purpose) + " needs libcurl: " + dlerror() +
                                             " (Debian/Ubuntu: apt-get install libcurl4; Ubuntu 24.04: libcurl4t64)");
  try {
    resolve(library_, "curl_global_init", api_.global_init);
    resolve(library_, "curl_global_cleanup", api_.global_cleanup);
    resolve(library_, "curl_easy_init", api_.easy_init);
    resolve(library_, "curl_easy_cleanup", api_.easy_cleanup);
    resolve(library_, "curl_easy_setopt", api_.easy_setopt);
    resolve(library_, "curl_easy_getinfo", api_.easy_getinfo);
    resolve(library_, "curl_easy_perform", api_.easy_perform);
    resolve(library_, "curl_easy_strerror", api_.easy_strerror);
    resolve(library_, "curl_easy_escape", api_.easy_escape);
    resolve(library_, "curl_free", api_.free);
    resolve(library_, "curl_slist_append", api_.slist_append);
    resolve(library_, "curl_slist_free_all", api_.slist_free_all);
    resolve(library_, "curl_multi_init", api_.multi_init);
    resolve(library_, "curl_multi_cleanup", api_.multi_cleanup);
    resolve(library_, "curl_multi_setopt", api_.multi_setopt);
    resolve(library_, "curl_multi_add_handle", api_.multi_add_handle);
    resolve(library_, "curl_multi_remove_handle", api_.multi_remove_handle);
    resolve(library_, "curl_multi_socket_action", api_.multi_socket_action);
    resolve(library_, "curl_multi_info_read", api_.multi_info_read);
    if (api_.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw Error(ErrorKind::kInternal, "curl_global_init failed");
  } catch (...) {
    dlclose(library_);
    throw;
  }
}

CurlSession::~CurlSession() {
  api_.global_cleanup();
  dlclose(library_);
}

}  // namespace qinfer
