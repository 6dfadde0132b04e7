// Python methods of str, dict, list and tuple that the sandbox allows templates to call.
#include <algorithm>
#include <charconv>
#include <string>

#include "chat_template/jinja/builtins.h"
#include "chat_template/jinja/utf8_text.h"
#include "util/utf8.h"

namespace qinfer::jinja {

namespace {

constexpr std::string_view kStringMethods[] = {
    "startswith", "endswith",  "split",     "rsplit",     "splitlines",   "strip",        "lstrip",    "rstrip",
    "replace",    "upper",     "lower",     "title",      "capitalize",   "find",         "rfind",     "index",
    "rindex",     "count",     "join",      "isdigit",    "isalpha",      "isalnum",      "isspace",   "isupper",
    "islower",    "format",    "zfill",     "center",     "ljust",        "rjust",        "casefold",  "swapcase",
    "isnumeric",  "isdecimal", "partition", "rpartition", "removeprefix", "removesuffix", "expandtabs"};
constexpr std::string_view kDictMethods[] = {"items", "keys", "values", "get", "copy"};
constexpr std::string_view kSequenceMethods[] = {"index", "count", "copy"};

bool listed(std::string_view name, const auto& names) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

void require_arguments(std::string_view method, const CallArgs& args, size_t min, size_t max) {
  if (args.positional.size() < min || args.positional.size() > max) {
    throw Failure(std::string(method) + "() takes " + std::to_string(min) + " to " + std::to_string(max) +
                  " arguments (" + std::to_string(args.positional.size()) + " given)");
  }
}

const std::string& string_argument(std::string_view method, const Value& v) {
  if (!v.is_string()) throw Failure(std::string(method) + "() argument must be str, not " + v.type_name());
  return v.str();
}

// Optional `chars` argument of strip(): None or absent means whitespace.
const std::string* strip_chars(std::string_view method, const CallArgs& args) {
  require_arguments(method, args, 0, 1);
  if (args.positional.empty() || args.positional[0].is_none()) return nullptr;
  return &string_argument(method, args.positional[0]);
}

int64_t max_split(const CallArgs& args, size_t index) {
  const Value* v = args.get("maxsplit", index);
  if (v == nullptr) return -1;
  if (!v->is_int()) throw Failure("maxsplit must be an integer");
  return v->as_int();
}

Value split_on_whitespace(std::string_view text, int64_t limit) {
  ValueList parts;
  size_t pos = 0;
  while (true) {
    while (pos < text.size()) {
      size_t next = pos;
      if (!is_python_space(utf8::decode_lenient(text, next))) break;
      pos = next;
    }
    if (pos >= text.size()) break;
    if (limit >= 0 && static_cast<int64_t>(parts.size()) == limit) {
      std::string_view rest = strip(text.substr(pos), nullptr, StripSide::kRight);
      parts.push_back(Value::string(std::string(rest)));
      break;
    }
    size_t end = pos;
    while (end < text.size()) {
      size_t next = end;
      if (is_python_space(utf8::decode_lenient(text, next))) break;
      end = next;
    }
    parts.push_back(Value::string(std::string(text.substr(pos, end - pos))));
    pos = end;
  }
  return Value::list(std::move(parts));
}

Value split(const std::string& text, const CallArgs& args, bool from_right) {
  const Value* separator = args.get("sep", 0);
  const int64_t limit = max_split(args, 1);
  if (separator == nullptr || separator->is_none()) {
    if (!from_right || limit < 0) return split_on_whitespace(text, limit);
    throw Failure("rsplit() on whitespace with maxsplit is not supported");
  }
  const std::string& sep = string_argument("split", *separator);
  if (sep.empty()) throw Failure("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    for (size_t hit = text.find(sep);
         hit != std::string::npos && (limit < 0 || static_cast<int64_t>(parts.size()) < limit);
         hit = text.find(sep, start)) {
      parts.push_back(text.substr(start, hit - start));
      start = hit + sep.size();
    }
    parts.push_back(text.substr(start));
  } else {
    size_t end = text.size();
    while (limit < 0 || static_cast<int64_t>(parts.size()) < limit) {
      if (end < sep.size()) break;
      const size_t hit = text.rfind(sep, end - sep.size());
      if (hit == std::string::npos) break;
      parts.push_back(text.substr(hit + sep.size(), end - hit - sep.size()));
      end = hit;
    }
    parts.push_back(text.substr(0, end));
    std::reverse(parts.begin(), parts.end());
  }
  ValueList values;
  values.reserve(parts.size());
  for (std::string& part : parts) values.push_back(Value::string(std::move(part)));
  return Value::list(std::move(values));
}

bool affix_matches(const std::string& text, const Value& affix, bool prefix) {
  auto one = [&](const Value& candidate) {
    const std::string& a = string_argument(prefix ? "startswith" : "endswith", candidate);
    if (a.size() > text.size()) return false;
    return prefix ? text.compare(0, a.size(), a) == 0 : text.compare(text.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.kind() == Value::Kind::kTuple) {
    return std::any_of(affix.items().begin(), affix.items().end(), one);
  }
  return one(affix);
}

int64_t code_point_index(const std::string& text, size_t byte_offset) {
  return static_cast<int64_t>(utf8::count_code_points(std::string_view(text).substr(0, byte_offset)));
}

template <typename Predicate>
Value all_code_points(const std::string& text, Predicate predicate) {
  if (text.empty()) return Value::boolean(false);
  size_t pos = 0;
  while (pos < text.size()) {
    if (!predicate(utf8::decode_lenient(text, pos))) return Value::boolean(false);
  }
  return Value::boolean(true);
}

// str.format with automatic or explicit positional fields and keyword fields, no format specs.
Value format(const std::string& pattern, const CallArgs& args) {
  std::string out;
  size_t automatic = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if ((c == '{' || c == '}') && i + 1 < pattern.size() && pattern[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c == '}') throw Failure("Single '}' encountered in format string");
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = pattern.find('}', i);
    if (close == std::string::npos) throw Failure("Single '{' encountered in format string");
    const std::string field = pattern.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) throw Failure("format specs are not supported");
    const Value* value = nullptr;
    if (field.empty()) {
      value = automatic < args.positional.size() ? &args.positional[automatic] : nullptr;
      ++automatic;
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t index = 0;
      const auto parsed = std::from_chars(field.data(), field.data() + field.size(), index);
      value = parsed.ec == std::errc() && index < args.positional.size() ? &args.positional[index] : nullptr;
    } else {
      value = args.get(field);
    }
    if (value == nullptr) throw Failure("format field {" + field + "} has no argument");
    value->append_output(out);
    i = close;
  }
  return Value::string(std::move(out));
}

Value pad(const std::string& text, const CallArgs& args, char side) {
  require_arguments("pad", args, 1, 2);
  if (!args.positional[0].is_int()) throw Failure("width must be an integer");
  const int64_t width = args.positional[0].as_int();
  std::string fill = " ";
  if (args.positional.size() == 2) fill = string_argument("pad", args.positional[1]);
  const int64_t length = Value::string(text).length();
  if (width <= length) return Value::string(text);
  const auto missing = static_cast<size_t>(std::min<int64_t>(width - length, int64_t{1} << 24));
  size_t left = side == 'r' ? missing : side == 'l' ? 0 : missing / 2 + (missing & width & 1);
  std::string out;
  for (size_t i = 0; i < left; ++i) out += fill;
  out += text;
  for (size_t i = left; i < missing; ++i) out += fill;
  return Value::string(std::move(out));
}

Value string_method(const std::string& text, std::string_view name, const CallArgs& args) {
  if (name == "startswith" || name == "endswith") {
    require_arguments(name, args, 1, 1);
    return Value::boolean(affix_matches(text, args.positional[0], name == "startswith"));
  }
  if (name == "split" || name == "rsplit") return split(text, args, name == "rsplit");
  if (name == "splitlines") {
    ValueList lines;
    size_t start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n' || text[i] == '\r') {
        lines.push_back(Value::string(text.substr(start, i - start)));
        if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
        start = i + 1;
      }
    }
    if (start < text.size()) lines.push_back(Value::string(text.substr(start)));
    return Value::list(std::move(lines));
  }
  if (name == "strip") return Value::string(std::string(strip(text, strip_chars(name, args), StripSide::kBoth)));
  if (name == "lstrip") return Value::string(std::string(strip(text, strip_chars(name, args), StripSide::kLeft)));
  if (name == "rstrip") return Value::string(std::string(strip(text, strip_chars(name, args), StripSide::kRight)));
  if (name == "replace") {
    require_arguments(name, args, 2, 3);
    const std::string& old_text = string_argument(name, args.positional[0]);
    const std::string& new_text = string_argument(name, args.positional[1]);
    int64_t count = args.positional.size() == 3 && args.positional[2].is_int() ? args.positional[2].as_int() : -1;
    std::string out;
    if (old_text.empty()) {
      const std::vector<size_t> offsets = code_point_offsets(text);
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        if (count < 0 || static_cast<int64_t>(i) < count) out += new_text;
        out.append(text, offsets[i], offsets[i + 1] - offsets[i]);
      }
      if (count < 0 || static_cast<int64_t>(offsets.size()) - 1 < count) out += new_text;
      return Value::string(std::move(out));
    }
    size_t start = 0;
    for (size_t hit = text.find(old_text); hit != std::string::npos && count != 0; hit = text.find(old_text, start)) {
      out.append(text, start, hit - start);
      out += new_text;
      start = hit + old_text.size();
      if (count > 0) --count;
    }
    out.append(text, start, std::string::npos);
    return Value::string(std::move(out));
  }
  if (name == "upper") return Value::string(to_upper(text));
  if (name == "lower" || name == "casefold") return Value::string(to_lower(text));
  if (name == "title") return Value::string(to_title(text));
  if (name == "capitalize") return Value::string(capitalize(text));
  if (name == "swapcase") {
    std::string out;
    size_t pos = 0;
    while (pos < text.size()) {
      const size_t start = pos;
      utf8::decode_lenient(text, pos);
      const std::string piece = text.substr(start, pos - start);
      const std::string upper = to_upper(piece);
      out += upper != piece ? upper : to_lower(piece);
    }
    return Value::string(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    require_arguments(name, args, 1, 1);
    const std::string& needle = string_argument(name, args.positional[0]);
    if (name == "count") {
      if (needle.empty()) return Value::integer(Value::string(text).length() + 1);
      int64_t n = 0;
      for (size_t hit = text.find(needle); hit != std::string::npos; hit = text.find(needle, hit + needle.size())) ++n;
      return Value::integer(n);
    }
    const size_t hit = name[0] == 'r' ? text.rfind(needle) : text.find(needle);
    if (hit == std::string::npos) {
      if (name == "index" || name == "rindex") throw Failure("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(code_point_index(text, hit));
  }
  if (name == "join") {
    require_arguments(name, args, 1, 1);
    std::string out;
    bool first = true;
    for (const Value& item : iterate(args.positional[0])) {
      if (!item.is_string()) throw Failure("sequence item: expected str instance, " + item.type_name() + " found");
      if (!first) out += text;
      first = false;
      out += item.str();
    }
    return Value::string(std::move(out));
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") {
    return all_code_points(text, [](char32_t cp) { return cp >= '0' && cp <= '9'; });
  }
  if (name == "isalpha") return all_code_points(text, is_letter);
  if (name == "isalnum") return all_code_points(text, is_alphanumeric);
  if (name == "isspace") return all_code_points(text, is_python_space);
  if (name == "isupper") return Value::boolean(to_lower(text) != text && to_upper(text) == text);
  if (name == "islower") return Value::boolean(to_upper(text) != text && to_lower(text) == text);
  if (name == "format") return format(text, args);
  if (name == "zfill") {
    require_arguments(name, args, 1, 1);
    const bool sign = !text.empty() && (text[0] == '-' || text[0] == '+');
    Value padded = pad(text.substr(sign ? 1 : 0),
                       CallArgs{{Value::integer(args.positional[0].as_int() - sign), Value::string("0")}, {}}, 'r');
    return Value::string((sign ? text.substr(0, 1) : "") + padded.str());
  }
  if (name == "center") return pad(text, args, 'c');
  if (name == "ljust") return pad(text, args, 'l');
  if (name == "rjust") return pad(text, args, 'r');
  if (name == "partition" || name == "rpartition") {
    require_arguments(name, args, 1, 1);
    const std::string& sep = string_argument(name, args.positional[0]);
    if (sep.empty()) throw Failure("empty separator");
    const size_t hit = name == "partition" ? text.find(sep) : text.rfind(sep);
    if (hit == std::string::npos) {
      return name == "partition" ? Value::tuple({Value::string(text), Value::string(""), Value::string("")})
                                 : Value::tuple({Value::string(""), Value::string(""), Value::string(text)});
    }
    return Value::tuple(
        {Value::string(text.substr(0, hit)), Value::string(sep), Value::string(text.substr(hit + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    require_arguments(name, args, 1, 1);
    const std::string& affix = string_argument(name, args.positional[0]);
    if (affix_matches(text, args.positional[0], name == "removeprefix")) {
      return Value::string(name == "removeprefix" ? text.substr(affix.size())
                                                  : text.substr(0, text.size() - affix.size()));
    }
    return Value::string(text);
  }
  if (name == "expandtabs") {
    std::string out;
    for (char c : text) out += c == '\t' ? std::string(8 - out.size() % 8, ' ') : std::string(1, c);
    return Value::string(std::move(out));
  }
  throw Failure("str." + std::string(name) + "() is not supported");
}

Value dict_method(const Value& dict, std::string_view name, const CallArgs& args) {
  if (name == "get") {
    require_arguments(name, args, 1, 2);
    if (const Value* member = dict.find(args.positional[0])) return *member;
    return args.positional.size() == 2 ? args.positional[1] : Value::none();
  }
  require_arguments(name, args, 0, 0);
  if (name == "copy") return Value::dict(dict.entries());
  ValueList out;
  out.reserve(dict.entries().size());
  for (const auto& [key, value] : dict.entries()) {
    if (name == "items") {
      out.push_back(Value::tuple({key, value}));
    } else {
      out.push_back(name == "keys" ? key : value);
    }
  }
  return Value::list(std::move(out));
}

Value sequence_method(const Value& sequence, std::string_view name, const CallArgs& args) {
  if (name == "copy") {
    require_arguments(name, args, 0, 0);
    return Value::list(sequence.items());
  }
  require_arguments(name, args, 1, 1);
  int64_t count = 0;
  for (size_t i = 0; i < sequence.items().size(); ++i) {
    if (!values_equal(sequence.items()[i], args.positional[0])) continue;
    if (name == "index") return Value::integer(static_cast<int64_t>(i));
    ++count;
  }
  if (name == "index") throw Failure("value is not in list");
  return Value::integer(count);
}

}  // namespace

bool has_method(const Value& receiver, std::string_view name) {
  switch (receiver.kind()) {
    case Value::Kind::kString:
      return listed(name, kStringMethods);
    case Value::Kind::kDict:
      return listed(name, kDictMethods);
    case Value::Kind::kList:
      return listed(name, kSequenceMethods);
    case Value::Kind::kTuple:
      return name == "index" || name == "count";
    default:
      return false;
  }
}

Value call_method(const Value& receiver, std::string_view name, const CallArgs& args) {
  switch (receiver.kind()) {
    case Value::Kind::kString:
      return string_method(receiver.str(), name, args);
    case Value::Kind::kDict:
      return dict_method(receiver, name, args);
    default:
      return sequence_method(receiver, name, args);
  }
}

}  // namespace qinfer::jinja
