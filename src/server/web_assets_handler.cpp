// The chat page's files from the table compiled in at build time (web_assets.h); nothing is read from disk.

#include <algorithm>
#include <array>
#include <utility>

#include "server/api_error.h"
#include "server/handlers.h"
#include "server/web_assets.h"

namespace qinfer::server {
namespace {

// Only this server's own files: no inline script or style, no other origin, no framing. The page's API calls are
// same-origin (connect-src 'self').
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// If-None-Match holds "*" or a comma-separated list of (possibly weak, W/"...") entity tags.
bool client_has_current_copy(const HttpRequest& request, std::string_view quoted_etag) {
  if (!request.has_header("If-None-Match")) return false;
  const std::string header = request.get_header_value("If-None-Match");
  return header == "*" || header.find(quoted_etag) != std::string::npos;
}

// The Content-Type for a served path by its extension ("/" is the HTML page).
std::string_view content_type_for(std::string_view url_path) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 7> kTypes{{
      {"/", "text/html; charset=utf-8"},
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
  }};
  const auto* match = std::find_if(kTypes.begin(), kTypes.end(),
                                   [url_path](const auto& entry) { return ends_with(url_path, entry.first); });
  return match == kTypes.end() ? "application/octet-stream" : match->second;
}

}  // namespace

void handle_web_asset(const HttpRequest& request, HttpResponse& response) {
  const std::span<const WebAsset> assets = embedded_web_assets();
  const auto asset = std::find_if(assets.begin(), assets.end(),
                                  [&request](const WebAsset& entry) { return entry.url_path == request.path; });
  if (asset == assets.end())
    throw ApiError(404, "invalid_request_error", "no page file at " + request.path, std::nullopt, "unknown_route");
  std::string quoted_etag = "\"";
  quoted_etag.append(asset->etag).push_back('"');
  response.set_header("Content-Security-Policy", kContentSecurityPolicy);
  response.set_header("X-Content-Type-Options", "nosniff");
  response.set_header("Referrer-Policy", "no-referrer");
  // File names carry no version, so the browser revalidates every time and gets a cheap 304 while they are current.
  response.set_header("Cache-Control", "no-cache");
  response.set_header("ETag", quoted_etag);
  if (client_has_current_copy(request, quoted_etag)) {
    response.status = 304;
    return;
  }
  // Always the whole file: Range is ignored (200), so no request can multiply the bytes it gets.
  response.set_content(std::string(reinterpret_cast<const char*>(asset->bytes.data()), asset->bytes.size()),
                       std::string(content_type_for(asset->url_path)));
}

}  // namespace qinfer::server
