// Escaping of text for HTML and XML (SVG) bodies and attribute values, as MarkupSafe (Jinja's `escape`) writes it.
#pragma once

#include <string>
#include <string_view>

namespace qinfer {

// & < > " ' become &amp; &lt; &gt; &#34; &#39;; everything else is copied.
inline std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace qinfer
