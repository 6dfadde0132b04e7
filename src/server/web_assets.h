// The chat page's files (web/), embedded into the binary at build time: web/embed_web_assets.cmake writes
// web_assets_data.cpp, which defines embedded_web_assets(). No file is read at run time.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace qinfer::server {

struct WebAsset {
  std::string_view url_path;  // where it is served: "/" for the page, "/static/..." for the rest
  std::string_view etag;      // first 16 hex digits of the bytes' SHA-256, computed at build time
  std::span<const std::uint8_t> bytes;
};

std::span<const WebAsset> embedded_web_assets();

}  // namespace qinfer::server
