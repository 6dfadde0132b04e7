#include "server/response_cache.h"

namespace qinfer::server {

std::optional<nlohmann::json> ResponseCache::find(const std::string& key) {
  std::lock_guard lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, it->second);
  return it->second->second;
}

void ResponseCache::insert(const std::string& key, nlohmann::json response) {
  if (capacity_ == 0) return;
  std::lock_guard lock(mutex_);
  auto it = index_.find(key);
  if (it != index_.end()) {
    it->second->second = std::move(response);
    entries_.splice(entries_.begin(), entries_, it->second);
    return;
  }
  entries_.emplace_front(key, std::move(response));
  index_[key] = entries_.begin();
  if (entries_.size() > capacity_) {
    index_.erase(entries_.back().first);
    entries_.pop_back();
  }
}

size_t ResponseCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace qinfer::server
