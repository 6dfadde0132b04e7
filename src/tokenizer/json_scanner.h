// A minimal pull scanner over JSON text, used to read the large parts of tokenizer.json (vocab and merges, ~10 MB)
// without building a DOM: loading must take well under 100 ms. Small sections are handed to nlohmann::json as raw
// text. Errors throw Error(kFormat) naming the file and byte offset.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace qinfer {

class JsonScanner {
 public:
  JsonScanner(std::string_view text, std::filesystem::path file) : text_(text), file_(std::move(file)) {}

  // Calls on_member(key) for each member of the object at the cursor; on_member must consume the value.
  template <typename OnMember>
  void for_each_member(OnMember&& on_member) {
    expect('{');
    if (consume_if('}')) return;
    std::string key_storage;
    do {
      const std::string key(string_value(key_storage));
      expect(':');
      on_member(key);
    } while (consume_if(','));
    expect('}');
  }

  // Calls on_element(index) for each element of the array at the cursor; on_element must consume the element.
  template <typename OnElement>
  void for_each_element(OnElement&& on_element) {
    expect('[');
    if (consume_if(']')) return;
    size_t index = 0;
    do {
      on_element(index++);
    } while (consume_if(','));
    expect(']');
  }

  // The string at the cursor, unescaped. Returns a view into the text when it has no escapes, else into storage.
  std::string_view string_value(std::string& storage);
  int64_t integer_value();
  // Skips the value at the cursor and returns its raw text.
  std::string_view raw_value();
  // The next non-space character (0 at the end of the text).
  char peek();

  [[noreturn]] void fail(const std::string& message) const;

 private:
  void skip_space();
  void expect(char c);
  bool consume_if(char c);
  void skip_string();
  uint32_t hex4();

  std::string_view text_;
  size_t pos_ = 0;
  std::filesystem::path file_;
};

}  // namespace qinfer
