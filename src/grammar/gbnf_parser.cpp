#include "grammar/gbnf_parser.h"

#include <string>

#include "grammar/text_cursor.h"
#include "util/error.h"

namespace qinfer::grammar {
namespace {

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : in_(text, "grammar") {}

  Grammar parse() {
    skip_space(true);
    while (!in_.at_end()) {
      parse_rule();
      skip_space(true);
    }
    for (int32_t r = 0; r < g_.num_rules(); ++r)
      if (g_.rule_body(r) < 0) {
        in_.seek(first_use_[static_cast<size_t>(r)]);
        in_.fail("rule '" + g_.rule_name(r) + "' is used but not defined");
      }
    const int32_t root = g_.find_rule("root");
    if (root < 0) in_.fail("the grammar has no 'root' rule");
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  void skip_space(bool newlines) {
    while (!in_.at_end()) {
      const char c = in_.peek();
      if (c == '#') {
        while (!in_.at_end() && in_.peek() != '\n') in_.advance();
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        in_.advance();
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    std::string name;
    while (!in_.at_end() && is_name_char(in_.peek())) name += in_.next();
    if (name.empty()) in_.fail("expected a rule name");
    return name;
  }

  int32_t rule_id(const std::string& name, size_t at) {
    int32_t id = g_.find_rule(name);
    if (id < 0) {
      id = g_.declare_rule(name);
      first_use_.push_back(at);
    }
    return id;
  }

  void parse_rule() {
    const size_t at = in_.position();
    const std::string name = parse_name();
    skip_space(false);
    if (!in_.consume("::=")) in_.fail("expected '::=' after rule name '" + name + "'");
    const int32_t rule = rule_id(name, at);
    if (g_.rule_body(rule) >= 0) {
      in_.seek(at);
      in_.fail("rule '" + name + "' is defined twice");
    }
    skip_space(false);
    g_.set_body(rule, parse_alternatives(false));
    skip_space(false);
    if (!in_.at_end() && in_.peek() != '\n') in_.fail("unexpected character '" + std::string(1, in_.peek()) + "'");
  }

  int32_t parse_alternatives(bool nested) {
    std::vector<int32_t> alts{parse_sequence(nested)};
    while (!in_.at_end() && in_.peek() == '|') {
      in_.advance();
      skip_space(true);
      alts.push_back(parse_sequence(nested));
    }
    return g_.choice(std::move(alts));
  }

  int32_t parse_sequence(bool nested) {
    std::vector<int32_t> items;
    while (!in_.at_end()) {
      const char c = in_.peek();
      if (c == '|' || c == ')' || c == '\n') break;
      int32_t item;
      if (c == '"') {
        in_.advance();
        std::string text;
        while (!in_.at_end() && in_.peek() != '"') append_utf8(text, read_char());
        if (!in_.consume("\"")) in_.fail("unterminated string literal");
        item = g_.literal(text);
      } else if (c == '[') {
        item = parse_class();
      } else if (c == '.') {
        in_.advance();
        item = g_.any_codepoint();
      } else if (c == '(') {
        in_.advance();
        skip_space(true);
        item = parse_alternatives(true);
        skip_space(true);
        if (!in_.consume(")")) in_.fail("expected ')'");
      } else if (is_name_char(c)) {
        const size_t at = in_.position();
        const std::string name = parse_name();
        item = g_.reference(rule_id(name, at));
      } else {
        in_.fail("unexpected character '" + std::string(1, c) + "'");
      }
      item = parse_postfix(item);
      items.push_back(item);
      skip_space(nested);
    }
    return g_.sequence(std::move(items));
  }

  int32_t parse_postfix(int32_t item) {
    while (!in_.at_end()) {
      const char c = in_.peek();
      if (c == '*') {
        in_.advance();
        item = g_.star(item);
      } else if (c == '+') {
        in_.advance();
        item = g_.plus(item);
      } else if (c == '?') {
        in_.advance();
        item = g_.optional(item);
      } else if (c == '{') {
        in_.advance();
        const auto [min, max] = in_.parse_bounds();
        item = g_.repeat(item, min, max);
      } else {
        break;
      }
    }
    return item;
  }

  int32_t parse_class() {
    in_.advance();  // '['
    const bool negated = in_.consume("^");
    std::vector<CodepointRange> ranges;
    while (!in_.at_end() && in_.peek() != ']') {
      const uint32_t first = read_char();
      uint32_t last = first;
      if (in_.peek() == '-' && in_.peek(1) != ']' && in_.peek(1) != '\0') {
        in_.advance();
        last = read_char();
        if (last < first) in_.fail("character range is out of order");
      }
      ranges.push_back({first, last});
    }
    if (!in_.consume("]")) in_.fail("unterminated character class");
    return g_.codepoints(std::move(ranges), negated);
  }

  // One code point of a literal or class, escapes resolved.
  uint32_t read_char() {
    if (in_.at_end()) in_.fail("unexpected end of grammar");
    if (in_.peek() != '\\') return in_.next_codepoint();
    in_.advance();
    const char e = in_.at_end() ? '\0' : in_.next();
    if (const int32_t control = TextCursor::control_escape(e); control >= 0) return static_cast<uint32_t>(control);
    switch (e) {
      case 'x':
        return in_.parse_hex(2);
      case 'u':
        return in_.parse_hex(4);
      case 'U':
        return in_.parse_hex(8);
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '^':
      case '\'':
      case '/':
      case '.':
        return static_cast<unsigned char>(e);
      default:
        in_.fail(std::string("unknown escape '\\") + e + "'");
    }
  }

  TextCursor in_;
  Grammar g_;
  std::vector<size_t> first_use_;  // per rule: where it was first named
};

}  // namespace

Grammar parse_gbnf(std::string_view text) { return GbnfParser(text).parse(); }

}  // namespace qinfer::grammar
