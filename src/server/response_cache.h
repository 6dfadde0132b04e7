// LRU cache of finished non-streamed responses, keyed by the canonical request (CompletionWork::cache_key). Only
// deterministic requests (greedy, or seeded) are stored, so a hit returns what the engine would have produced.
// Thread-safe.
#pragma once

#include <cstddef>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

namespace qinfer::server {

class ResponseCache {
 public:
  explicit ResponseCache(size_t capacity) : capacity_(capacity) {}

  std::optional<nlohmann::json> find(const std::string& key);
  void insert(const std::string& key, nlohmann::json response);
  size_t size() const;

 private:
  using Entry = std::pair<std::string, nlohmann::json>;
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace qinfer::server
