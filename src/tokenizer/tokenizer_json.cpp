#include "tokenizer/tokenizer_json.h"

#include <simdjson.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "util/error.h"
#include "util/mapped_file.h"

namespace qinfer {
namespace {

namespace ondemand = simdjson::ondemand;

// Turns simdjson error codes into Error(kFormat) "FILE: field 'F': MESSAGE (at byte N)". Field names are built by a
// callable only when something fails, so the 300k vocab and merges entries cost nothing extra.
class Reader {
 public:
  Reader(const std::filesystem::path& file, const char* text) : file_(file), text_(text) {}

  void start(ondemand::document& document) { document_ = &document; }

  template <typename T, typename FieldName>
  T take(simdjson::simdjson_result<T>&& result, const FieldName& field) {
    T value;
    if (const simdjson::error_code error = std::move(result).get(value)) fail(field(), simdjson::error_message(error));
    return value;
  }

  [[noreturn]] void fail(const std::string& field, const std::string& message) {
    std::string where;
    const char* location = nullptr;
    if (document_ != nullptr && !document_->current_location().get(location)) {
      where = " (at byte " + std::to_string(location - text_) + ")";
    }
    throw Error(ErrorKind::kFormat, file_.string() + ": field '" + field + "': " + message + where);
  }

  // The value's JSON text parsed by nlohmann::json (small sections only).
  nlohmann::json parse_small(ondemand::value value, const std::string& field) {
    const auto name = [&] { return field; };
    std::string_view raw;
    switch (take(value.type(), name)) {
      case ondemand::json_type::object:
        raw = take(take(value.get_object(), name).raw_json(), name);
        break;
      case ondemand::json_type::array:
        raw = take(take(value.get_array(), name).raw_json(), name);
        break;
      default:
        raw = value.raw_json_token();
    }
    nlohmann::json parsed = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) fail(field, "malformed JSON value");
    return parsed;
  }

 private:
  const std::filesystem::path& file_;
  const char* text_;
  ondemand::document* document_ = nullptr;
};

void read_vocab(Reader& reader, ondemand::value value, int64_t max_token_id, TokenizerJson& out) {
  out.vocab.reserve(150000);
  ondemand::object vocab = reader.take(value.get_object(), [] { return std::string("model.vocab"); });
  for (auto entry_result : vocab) {
    ondemand::field entry = reader.take(std::move(entry_result), [] { return std::string("model.vocab"); });
    const std::string_view token = reader.take(entry.unescaped_key(), [] { return std::string("model.vocab"); });
    const auto field = [&] { return "model.vocab['" + std::string(token) + "']"; };
    const int64_t id = reader.take(entry.value().get_int64(), field);
    if (id < 0 || id > max_token_id) reader.fail(field(), "id out of range: " + std::to_string(id));
    out.vocab.insert(token, static_cast<int32_t>(id));
    out.max_vocab_id = std::max(out.max_vocab_id, static_cast<int32_t>(id));
  }
}

void read_merges(Reader& reader, ondemand::value value, TokenizerJson& out) {
  out.merges.reserve(200000);
  ondemand::array merges = reader.take(value.get_array(), [] { return std::string("model.merges"); });
  size_t index = 0;
  for (auto element_result : merges) {
    const auto field = [&] { return "model.merges[" + std::to_string(index) + "]"; };
    ondemand::value element = reader.take(std::move(element_result), field);
    if (reader.take(element.type(), field) == ondemand::json_type::string) {  // older form: "left right"
      const std::string_view merge = reader.take(element.get_string(), field);
      const size_t space = merge.find(' ');
      if (space == std::string_view::npos || merge.find(' ', space + 1) != std::string_view::npos) {
        reader.fail(field(), "expected \"left right\", got \"" + std::string(merge) + "\"");
      }
      out.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
    } else {
      std::string_view pair[2];
      size_t parts = 0;
      for (auto part : reader.take(element.get_array(), field)) {
        if (parts == 2) reader.fail(field(), "expected a pair of strings, got more than two elements");
        pair[parts++] = reader.take(part.get_string(), field);
      }
      if (parts != 2) reader.fail(field(), "expected a pair of strings, got " + std::to_string(parts) + " element(s)");
      out.merges.emplace_back(pair[0], pair[1]);
    }
    ++index;
  }
}

void read_model(Reader& reader, ondemand::value value, int64_t max_token_id, TokenizerJson& out) {
  ondemand::object model = reader.take(value.get_object(), [] { return std::string("model"); });
  for (auto member_result : model) {
    ondemand::field member = reader.take(std::move(member_result), [] { return std::string("model"); });
    const std::string key(reader.take(member.unescaped_key(), [] { return std::string("model"); }));
    if (key == "vocab") {
      read_vocab(reader, member.value(), max_token_id, out);
    } else if (key == "merges") {
      read_merges(reader, member.value(), out);
    } else {
      out.model_options[key] = reader.parse_small(member.value(), "model." + key);
    }
  }
}

// simdjson reads up to SIMDJSON_PADDING bytes past the end of the text. A file mapping is readable (and zero) up to
// the end of its last page, so the mapping is parsed in place when that slack suffices and copied otherwise.
simdjson::padded_string_view padded_text(const MappedFile& file, simdjson::padded_string& copy) {
  const auto* data = reinterpret_cast<const char*>(file.bytes().data());
  const size_t size = file.bytes().size();
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (size + page - 1) / page * page;
  if (size > 0 && mapped - size >= simdjson::SIMDJSON_PADDING) return simdjson::padded_string_view(data, size, mapped);
  copy = simdjson::padded_string(size);  // padded; an empty file stays empty and simdjson reports it
  if (size > 0) std::memcpy(copy.data(), data, size);
  return copy;
}

}  // namespace

TokenizerJson read_tokenizer_json(const std::filesystem::path& path, int64_t max_token_id) {
  const MappedFile file(path);
  simdjson::padded_string copy;
  const simdjson::padded_string_view text = padded_text(file, copy);
  // Unescaped strings live in the parser's buffer until it is destroyed; the merge views point there.
  auto parser = std::make_shared<ondemand::parser>();
  Reader reader(path, text.data());
  const auto top_level = [] { return std::string("(top level)"); };
  ondemand::document document = reader.take(parser->iterate(text), top_level);
  reader.start(document);

  TokenizerJson out;
  bool has_model = false;
  for (auto member_result : reader.take(document.get_object(), top_level)) {
    ondemand::field member = reader.take(std::move(member_result), top_level);
    const std::string key(reader.take(member.unescaped_key(), top_level));
    if (key == "model") {
      read_model(reader, member.value(), max_token_id, out);
      has_model = true;
    } else {
      out.sections[key] = reader.parse_small(member.value(), key);
    }
  }
  // simdjson 3.0 has no document::at_end(); current_location() is OUT_OF_BOUNDS once every token is consumed.
  const char* rest = nullptr;
  if (document.current_location().get(rest) != simdjson::OUT_OF_BOUNDS) {
    reader.fail("(top level)", "unexpected text after the top-level object");
  }
  if (!has_model) throw Error(ErrorKind::kFormat, path.string() + ": field 'model' is missing");
  out.string_storage = std::move(parser);
  return out;
}

}  // namespace qinfer
