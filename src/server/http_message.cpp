#include "server/http_message.h"

#include <algorithm>
#include <cctype>

namespace qinfer::server {
namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

const std::string* find_header(const HttpHeaders& headers, std::string_view name) {
  for (const auto& [key, value] : headers)
    if (same_name(key, name)) return &value;
  return nullptr;
}

std::string HttpRequest::get_header_value(std::string_view name) const {
  const std::string* value = find_header(headers, name);
  return value ? *value : std::string();
}

void HttpResponse::set_header(std::string_view name, std::string value) {
  for (auto& [key, existing] : headers)
    if (same_name(key, name)) {
      existing = std::move(value);
      return;
    }
  headers.emplace_back(name, std::move(value));
}

void StreamWakeup::notify() {
  if (pending_.exchange(true, std::memory_order_acq_rel)) return;  // a wake-up is already on its way
  std::lock_guard lock(mutex_);
  if (wake_) wake_();
}

void StreamWakeup::attach(std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  wake_ = std::move(wake);
  if (pending_.load(std::memory_order_acquire)) wake_();
}

void StreamWakeup::detach() {
  std::lock_guard lock(mutex_);
  wake_ = nullptr;
}

}  // namespace qinfer::server
