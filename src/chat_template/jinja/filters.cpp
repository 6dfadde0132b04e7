// jinja2's built-in filters (the subset chat templates use) and transformers' tojson.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "chat_template/jinja/builtins.h"
#include "chat_template/jinja/interpreter.h"
#include "chat_template/jinja/python_format.h"
#include "chat_template/jinja/utf8_text.h"
#include "util/html_escape.h"
#include "util/utf8.h"

namespace qinfer::jinja {

namespace {

const Value* argument(const CallArgs& args, std::string_view name, size_t index) { return args.get(name, index); }

bool flag_argument(const CallArgs& args, std::string_view name, size_t index) {
  const Value* v = argument(args, name, index);
  return v != nullptr && v->truthy();
}

std::string soft_str(const Value& v) { return v.to_output(); }

Value tojson(const Value& subject, const CallArgs& args) {
  JsonStyle style;
  style.ensure_ascii = flag_argument(args, "ensure_ascii", 0);
  if (const Value* indent = argument(args, "indent", 1); indent != nullptr && !indent->is_none()) {
    if (indent->is_string()) {
      style.indent_is_text = true;
      style.indent_text = indent->str();
    } else if (indent->is_int()) {
      style.indent = static_cast<int>(std::clamp<int64_t>(indent->as_int(), 0, 64));
    } else {
      throw Failure("tojson: indent must be an integer or a string");
    }
    style.item_separator = ",";
  }
  if (const Value* separators = argument(args, "separators", 2); separators != nullptr && !separators->is_none()) {
    if (!separators->is_sequence_kind() || separators->items().size() != 2 || !separators->items()[0].is_string() ||
        !separators->items()[1].is_string()) {
      throw Failure("tojson: separators must be a pair of strings");
    }
    style.item_separator = separators->items()[0].str();
    style.key_separator = separators->items()[1].str();
  }
  style.sort_keys = flag_argument(args, "sort_keys", 3);
  std::string out;
  append_python_json(subject, style, out);
  return Value::string(std::move(out));
}

Value to_int(const Value& subject, const CallArgs& args) {
  subject.require_defined();  // int(Undefined) raises in jinja2 rather than falling back to the default
  const Value* fallback = argument(args, "default", 0);
  const Value fallback_value = fallback != nullptr ? *fallback : Value::integer(0);
  if (subject.is_float()) {
    if (!std::isfinite(subject.as_double())) return fallback_value;
    return Value::integer(static_cast<int64_t>(subject.as_double()));
  }
  if (subject.is_number()) return Value::integer(subject.as_int());
  if (!subject.is_string()) return fallback_value;
  std::string text(strip(subject.str(), nullptr, StripSide::kBoth));
  text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
  if (text.empty()) return fallback_value;
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() + text.size() && errno == 0) return Value::integer(parsed);
  const double as_float = std::strtod(text.c_str(), &end);
  if (end == text.c_str() + text.size() && std::isfinite(as_float) && std::fabs(as_float) < 9.2e18) {
    return Value::integer(static_cast<int64_t>(as_float));
  }
  return fallback_value;
}

Value to_float(const Value& subject, const CallArgs& args) {
  subject.require_defined();
  const Value* fallback = argument(args, "default", 0);
  const Value fallback_value = fallback != nullptr ? *fallback : Value::floating(0.0);
  if (subject.is_number()) return Value::floating(subject.as_double());
  if (!subject.is_string()) return fallback_value;
  const std::string text(strip(subject.str(), nullptr, StripSide::kBoth));
  if (text.empty()) return fallback_value;
  char* end = nullptr;
  const double parsed = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return fallback_value;
  return Value::floating(parsed);
}

Value round_filter(const Value& subject, const CallArgs& args) {
  if (!subject.is_number()) throw Failure("round: a number is required, not " + subject.type_name());
  const Value* precision_value = argument(args, "precision", 0);
  const int64_t precision = precision_value != nullptr && precision_value->is_int() ? precision_value->as_int() : 0;
  const Value* method_value = argument(args, "method", 1);
  const std::string method = method_value != nullptr ? soft_str(*method_value) : "common";
  if (method == "common" && precision < 0) {
    const double scale = std::pow(10.0, static_cast<double>(std::max<int64_t>(precision, -300)));
    const double rounded = std::nearbyint(subject.as_double() * scale) / scale;
    return subject.is_float() ? Value::floating(rounded) : Value::integer(static_cast<int64_t>(rounded));
  }
  if (method == "common") {
    if (!subject.is_float()) return Value::integer(subject.as_int());
    // Python's round() rounds the exact binary value to the nearest decimal (ties to even), which is what
    // printf's correctly rounded conversion does; scaling by 10**n first would round 2.675 up.
    const int digits = static_cast<int>(std::clamp<int64_t>(precision, 0, 300));
    char buffer[512];
    std::snprintf(buffer, sizeof(buffer), "%.*f", digits, subject.as_double());
    return Value::floating(std::strtod(buffer, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(precision, -300, 300)));
  const double x = subject.as_double() * scale;
  if (method == "ceil") return Value::floating(std::ceil(x) / scale);
  if (method == "floor") return Value::floating(std::floor(x) / scale);
  throw Failure("method must be common, ceil or floor");
}

Value indent(const Value& subject, const CallArgs& args) {
  std::string prefix = "    ";
  if (const Value* width = argument(args, "width", 0)) {
    prefix = width->is_string() ? width->str()
                                : std::string(static_cast<size_t>(std::clamp<int64_t>(width->as_int(), 0, 1024)), ' ');
  }
  const bool first = flag_argument(args, "first", 1);
  const bool blank = flag_argument(args, "blank", 2);
  // jinja2 appends a newline before splitting, so a trailing newline yields a final empty line.
  const Value split_lines = call_method(Value::string(soft_str(subject) + "\n"), "splitlines", CallArgs{});
  std::vector<std::string> lines;
  for (const Value& line : split_lines.items()) lines.push_back(line.str());
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) {
      out += '\n';
      if (blank || !lines[i].empty()) out += prefix;
    }
    out += lines[i];
  }
  if (first) out = prefix + out;
  return Value::string(std::move(out));
}

// The value an attribute path like "a.b" or "0" names, as jinja2's make_attrgetter resolves it.
Value attribute_of(const Value& item, const std::string& path) {
  Value current = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    current = get_item(current, numeric ? Value::integer(std::atoll(part.c_str())) : Value::string(part));
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

// Key used by sort/dictsort/unique/min/max: lowercases strings unless case-sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(to_lower(v.str())) : v;
}

Value sort_filter(const Value& subject, const CallArgs& args) {
  const bool reverse = flag_argument(args, "reverse", 0);
  const bool case_sensitive = flag_argument(args, "case_sensitive", 1);
  const Value* attribute = argument(args, "attribute", 2);
  ValueList items = iterate(subject);
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) {
    Value key = attribute != nullptr ? attribute_of(item, soft_str(*attribute)) : item;
    keyed.emplace_back(sort_key(key, case_sensitive), std::move(item));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& a, const auto& b) {
    return reverse ? value_less(b.first, a.first) : value_less(a.first, b.first);
  });
  ValueList out;
  for (auto& entry : keyed) out.push_back(std::move(entry.second));
  return Value::list(std::move(out));
}

Value dictsort(const Value& subject, const CallArgs& args) {
  if (!subject.is_dict()) throw Failure("dictsort: a mapping is required");
  const bool case_sensitive = flag_argument(args, "case_sensitive", 0);
  const Value* by = argument(args, "by", 1);
  const bool by_value = by != nullptr && soft_str(*by) == "value";
  const bool reverse = flag_argument(args, "reverse", 2);
  ValueList pairs;
  for (const auto& [key, value] : subject.entries()) pairs.push_back(Value::tuple({key, value}));
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    const Value ka = sort_key(a.items()[by_value ? 1 : 0], case_sensitive);
    const Value kb = sort_key(b.items()[by_value ? 1 : 0], case_sensitive);
    return reverse ? value_less(kb, ka) : value_less(ka, kb);
  });
  return Value::list(std::move(pairs));
}

Value min_max(const Value& subject, const CallArgs& args, bool want_max) {
  const bool case_sensitive = flag_argument(args, "case_sensitive", 0);
  const Value* attribute = argument(args, "attribute", 1);
  const ValueList items = iterate(subject);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value a = sort_key(attribute ? attribute_of(items[i], soft_str(*attribute)) : items[i], case_sensitive);
    const Value b = sort_key(attribute ? attribute_of(items[best], soft_str(*attribute)) : items[best], case_sensitive);
    if (want_max ? value_less(b, a) : value_less(a, b)) best = i;
  }
  return items[best];
}

CallArgs shifted(const CallArgs& args, size_t drop) {
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(std::min(drop, args.positional.size())),
                         args.positional.end());
  rest.keyword = args.keyword;
  return rest;
}

Value map_filter(Interpreter& interpreter, const Value& subject, const CallArgs& args) {
  ValueList out;
  if (const Value* attribute = args.get("attribute")) {
    const Value* fallback = args.get("default");
    for (const Value& item : iterate(subject)) {
      Value v = attribute_of(item, soft_str(*attribute));
      out.push_back(v.is_undefined() && fallback != nullptr ? *fallback : v);
    }
    return Value::generator("generator", std::move(out));
  }
  if (args.positional.empty()) throw Failure("map requires a filter name or attribute=");
  const std::string filter = soft_str(args.positional[0]);
  const CallArgs rest = shifted(args, 1);
  for (const Value& item : iterate(subject)) out.push_back(apply_filter(interpreter, filter, item, rest));
  return Value::generator("generator", std::move(out));
}

Value select_filter(Interpreter& interpreter, const Value& subject, const CallArgs& args, bool keep,
                    bool by_attribute) {
  ValueList out;
  size_t consumed = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) throw Failure("selectattr/rejectattr require an attribute name");
    attribute = soft_str(args.positional[0]);
    consumed = 1;
  }
  std::string test;
  if (args.positional.size() > consumed) test = soft_str(args.positional[consumed++]);
  const CallArgs rest = shifted(args, consumed);
  for (const Value& item : iterate(subject)) {
    const Value probe = by_attribute ? attribute_of(item, attribute) : item;
    const bool passed = test.empty() ? probe.truthy() : apply_test(interpreter, test, probe, rest);
    if (passed == keep) out.push_back(item);
  }
  return Value::generator("generator", std::move(out));
}

// jinja2's title filter (unlike str.title()) starts words only after whitespace or one of - ( { [ <, then
// uppercases each word's first character and lowercases the rest.
Value title_words(const std::string& text) {
  std::string out;
  bool word_start = true;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    const char32_t cp = utf8::decode_lenient(text, pos);
    const std::string piece = text.substr(start, pos - start);
    const bool separator = is_python_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    if (separator) {
      out += piece;
      word_start = true;
      continue;
    }
    out += word_start ? to_upper(piece) : to_lower(piece);
    word_start = false;
  }
  return Value::string(std::move(out));
}

// jinja2 counts matches of the regex \w+ (Unicode letters, digits and underscore).
int64_t count_words(const std::string& text) {
  int64_t words = 0;
  bool in_word = false;
  size_t pos = 0;
  while (pos < text.size()) {
    const char32_t cp = utf8::decode_lenient(text, pos);
    const bool word_char = cp == '_' || is_alphanumeric(cp);
    words += word_char && !in_word;
    in_word = word_char;
  }
  return words;
}

Value escape(const Value& subject) { return Value::string(html_escape(soft_str(subject))); }

Value first_or_last(const Value& subject, bool first) {
  if (subject.kind() == Value::Kind::kGenerator) {  // first takes one item (next()); last needs reversed()
    if (!first) throw Failure("'" + subject.python_type() + "' object is not reversible");
    Generator& generator = subject.generator_state();
    if (generator.position == generator.items.size()) return Value::undefined("No first item, sequence was empty.");
    return generator.items[generator.position++];
  }
  const ValueList items = iterate(subject);
  if (items.empty())
    return Value::undefined(first ? "No first item, sequence was empty." : "No last item, sequence was empty.");
  return first ? items.front() : items.back();
}

Value unique(const Value& subject, const CallArgs& args) {
  const bool case_sensitive = flag_argument(args, "case_sensitive", 0);
  const Value* attribute = argument(args, "attribute", 1);
  ValueList out;
  ValueList seen;
  for (const Value& item : iterate(subject)) {
    const Value key = sort_key(attribute ? attribute_of(item, soft_str(*attribute)) : item, case_sensitive);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return values_equal(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::generator("generator", std::move(out));
}

Value sum(const Value& subject, const CallArgs& args) {
  const Value* attribute = argument(args, "attribute", 0);
  const Value* start = argument(args, "start", 1);
  Value total = start != nullptr ? *start : Value::integer(0);
  for (const Value& item : iterate(subject)) {
    total = binary_operation("+", total, attribute ? attribute_of(item, soft_str(*attribute)) : item);
  }
  return total;
}

}  // namespace

bool is_filter_name(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "tojson", "trim", "length", "count", "default", "d", "join", "items", "list", "first", "last", "lower", "upper",
      "title", "capitalize", "replace", "string", "safe", "e", "escape", "forceescape", "int", "float", "abs", "round",
      "reverse", "sort", "dictsort", "unique", "min", "max", "sum", "map", "select", "reject", "selectattr",
      "rejectattr", "attr", "indent", "center", "wordcount", "format",
      // known to jinja2, refused when rendered
      "batch", "filesizeformat", "groupby", "pprint", "random", "slice", "striptags", "truncate", "urlencode", "urlize",
      "wordwrap", "xmlattr"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

Value apply_filter(Interpreter& interpreter, std::string_view name, const Value& subject, const CallArgs& args) {
  if (name == "tojson") return tojson(subject, args);
  if (name == "trim") {
    const Value* chars = argument(args, "chars", 0);
    const std::string chars_text = chars != nullptr && !chars->is_none() ? soft_str(*chars) : "";
    return Value::string(std::string(
        strip(soft_str(subject), chars != nullptr && !chars->is_none() ? &chars_text : nullptr, StripSide::kBoth)));
  }
  if (name == "length" || name == "count") {
    const int64_t length = subject.length();
    if (length < 0) throw Failure("object of type '" + subject.python_type() + "' has no len()");
    return Value::integer(length);
  }
  if (name == "default" || name == "d") {
    const bool use_default = subject.is_undefined() || (flag_argument(args, "boolean", 1) && !subject.truthy());
    if (!use_default) return subject;
    const Value* fallback = argument(args, "default_value", 0);
    return fallback != nullptr ? *fallback : Value::string("");
  }
  if (name == "join") {
    const Value* separator = argument(args, "d", 0);
    const Value* attribute = argument(args, "attribute", 1);
    std::string out;
    bool first = true;
    for (const Value& item : iterate(subject)) {
      if (!first && separator != nullptr) separator->append_output(out);
      first = false;
      (attribute ? attribute_of(item, soft_str(*attribute)) : item).append_output(out);
    }
    return Value::string(std::move(out));
  }
  if (name == "items") {
    if (subject.is_undefined()) return Value::generator("generator", {});
    if (!subject.is_dict()) throw Failure("Can only get item pairs from a mapping.");
    return Value::generator("generator", call_method(subject, "items", CallArgs{}).items());
  }
  if (name == "list") return Value::list(iterate(subject));
  if (name == "first") return first_or_last(subject, true);
  if (name == "last") return first_or_last(subject, false);
  if (name == "lower") return Value::string(to_lower(soft_str(subject)));
  if (name == "upper") return Value::string(to_upper(soft_str(subject)));
  if (name == "title") return title_words(soft_str(subject));
  if (name == "capitalize") return Value::string(capitalize(soft_str(subject)));
  if (name == "replace") return call_method(Value::string(soft_str(subject)), "replace", args);
  if (name == "string" || name == "safe") return Value::string(soft_str(subject));
  if (name == "e" || name == "escape" || name == "forceescape") return escape(subject);
  if (name == "int") return to_int(subject, args);
  if (name == "float") return to_float(subject, args);
  if (name == "abs") {
    if (!subject.is_number()) throw Failure("bad operand type for abs(): '" + subject.type_name() + "'");
    if (subject.is_float()) return Value::floating(std::fabs(subject.as_double()));
    return subject.as_int() < 0 ? negate(subject) : Value::integer(subject.as_int());
  }
  if (name == "round") return round_filter(subject, args);
  if (name == "reverse") {
    if (subject.is_string()) {
      const Value backwards = Value::integer(-1);
      return slice(subject, nullptr, nullptr, &backwards);
    }
    // reversed() gives an iterator for lists, tuples and dicts; anything else is copied into a reversed list.
    const char* iterator_type = subject.kind() == Value::Kind::kList    ? "list_reverseiterator"
                                : subject.kind() == Value::Kind::kTuple ? "reversed"
                                : subject.is_dict()                     ? "dict_reversekeyiterator"
                                                                        : nullptr;
    ValueList items = iterate(subject);
    std::reverse(items.begin(), items.end());
    return iterator_type ? Value::generator(iterator_type, std::move(items)) : Value::list(std::move(items));
  }
  if (name == "sort") return sort_filter(subject, args);
  if (name == "dictsort") return dictsort(subject, args);
  if (name == "unique") return unique(subject, args);
  if (name == "min" || name == "max") return min_max(subject, args, name == "max");
  if (name == "sum") return sum(subject, args);
  if (name == "map") return map_filter(interpreter, subject, args);
  if (name == "select" || name == "reject") return select_filter(interpreter, subject, args, name == "select", false);
  if (name == "selectattr" || name == "rejectattr") {
    return select_filter(interpreter, subject, args, name == "selectattr", true);
  }
  if (name == "attr") {
    if (args.positional.empty()) throw Failure("attr requires a name");
    return get_attribute(subject, soft_str(args.positional[0]));
  }
  if (name == "indent") return indent(subject, args);
  if (name == "center")
    return call_method(Value::string(soft_str(subject)), "center",
                       args.positional.empty() ? CallArgs{{Value::integer(80)}, {}} : args);
  if (name == "wordcount") return Value::integer(count_words(soft_str(subject)));
  if (name == "format") return binary_operation("%", Value::string(soft_str(subject)), Value::tuple(args.positional));
  throw Failure("the '" + std::string(name) + "' filter is not supported");
}

}  // namespace qinfer::jinja
