#include "grammar/regex_parser.h"

#include "grammar/json_text.h"
#include "grammar/text_cursor.h"

namespace qinfer::grammar {
namespace {

using Ranges = std::vector<CodepointRange>;

const Ranges kDigits{{'0', '9'}};
const Ranges kWord{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace{{'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                    {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const Ranges kLineTerminators{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

class RegexParser {
 public:
  RegexParser(Grammar& g, std::string_view pattern, const RegexOptions& options)
      : g_(g), in_(pattern, "regex", false), options_(options), size_(pattern.size()) {}

  int32_t parse() {
    in_.consume("^");
    const int32_t e = parse_alternatives();
    if (!in_.at_end()) in_.fail("unmatched ')'");
    return e;
  }

 private:
  int32_t parse_alternatives() {
    std::vector<int32_t> alts{parse_sequence()};
    while (in_.consume("|")) alts.push_back(parse_sequence());
    return g_.choice(std::move(alts));
  }

  int32_t parse_sequence() {
    std::vector<int32_t> items;
    while (!in_.at_end() && in_.peek() != '|' && in_.peek() != ')') {
      if (in_.peek() == '$' && in_.position() + 1 == size_) {
        in_.advance();
        break;
      }
      items.push_back(parse_quantified(parse_atom()));
    }
    return g_.sequence(std::move(items));
  }

  int32_t parse_quantified(int32_t atom) {
    while (!in_.at_end()) {
      const char c = in_.peek();
      int32_t min, max;
      if (c == '*') {
        in_.advance(), min = 0, max = Grammar::kUnbounded;
      } else if (c == '+') {
        in_.advance(), min = 1, max = Grammar::kUnbounded;
      } else if (c == '?') {
        in_.advance(), min = 0, max = 1;
      } else if (c == '{' && in_.peek(1) >= '0' && in_.peek(1) <= '9') {
        in_.advance();
        std::tie(min, max) = in_.parse_bounds();
      } else {
        break;
      }
      if (in_.peek() == '+') in_.fail("possessive quantifiers are not supported");
      in_.consume("?");  // lazy: the same set of whole matches
      atom = g_.repeat(atom, min, max);
    }
    return atom;
  }

  int32_t parse_atom() {
    const char c = in_.peek();
    switch (c) {
      case '(': {
        in_.advance();
        if (in_.consume("?")) {
          if (in_.consume(":")) {
          } else if (in_.peek() == '=' || in_.peek() == '!' ||
                     (in_.peek() == '<' && (in_.peek(1) == '=' || in_.peek(1) == '!'))) {
            in_.fail("lookaround assertions are not supported");
          } else if (in_.consume("<") || in_.consume("P<")) {
            while (!in_.at_end() && in_.peek() != '>') in_.advance();
            if (!in_.consume(">")) in_.fail("unterminated group name");
          } else {
            in_.fail("unsupported group flag");
          }
        }
        const int32_t e = parse_alternatives();
        if (!in_.consume(")")) in_.fail("missing ')'");
        return e;
      }
      case '[':
        return parse_class();
      case '.':
        in_.advance();
        return set(kLineTerminators, true);
      case '\\':
        return parse_escape();
      case '*':
      case '+':
      case '?':
        in_.fail("nothing to repeat");
      case '^':
        in_.fail("'^' is only supported at the start (a pattern always matches the whole string)");
      case '$':
        in_.fail("'$' is only supported at the end (a pattern always matches the whole string)");
      default: {
        const uint32_t cp = in_.next_codepoint();
        return set({{cp, cp}}, false);
      }
    }
  }

  // \d-style class escapes as ranges; false for other escapes (in_ left before the escape letter).
  bool class_escape(Ranges& out) {
    const char e = in_.peek();
    const Ranges* base = e == 'd' || e == 'D'   ? &kDigits
                         : e == 'w' || e == 'W' ? &kWord
                         : e == 's' || e == 'S' ? &kSpace
                                                : nullptr;
    if (!base) return false;
    in_.advance();
    const bool negated = e == 'D' || e == 'W' || e == 'S';
    const Ranges ranges = negated ? normalize_ranges(*base, true) : *base;
    out.insert(out.end(), ranges.begin(), ranges.end());
    return true;
  }

  uint32_t escaped_char() {
    const char e = in_.next();
    if (const int32_t control = TextCursor::control_escape(e); control >= 0) return static_cast<uint32_t>(control);
    switch (e) {
      case 'x':
        return in_.parse_hex(2);
      case 'u': {
        if (!in_.consume("{")) return in_.parse_hex(4);
        uint32_t cp = 0;
        int digits = 0;
        while (!in_.at_end() && in_.peek() != '}') cp = cp * 16 + in_.parse_hex(1), ++digits;
        if (!in_.consume("}") || digits == 0 || cp > 0x10FFFF) in_.fail("bad \\u{...} escape");
        return cp;
      }
      case 'b':
      case 'B':
        in_.fail("word boundaries (\\b, \\B) are not supported");
      case 'p':
      case 'P':
        in_.fail("Unicode property classes (\\p{...}) are not supported");
      default:
        if (e >= '1' && e <= '9') in_.fail("backreferences are not supported");
        if (std::isalnum(static_cast<unsigned char>(e))) in_.fail(std::string("unknown escape '\\") + e + "'");
        return static_cast<unsigned char>(e);
    }
  }

  int32_t parse_escape() {
    in_.advance();
    if (in_.at_end()) in_.fail("pattern ends with '\\'");
    Ranges ranges;
    if (class_escape(ranges)) return set(ranges, false);
    const uint32_t cp = escaped_char();
    return set({{cp, cp}}, false);
  }

  int32_t parse_class() {
    in_.advance();
    const bool negated = in_.consume("^");
    Ranges ranges;
    bool first = true;
    while (!in_.at_end() && (in_.peek() != ']' || first)) {
      first = false;
      uint32_t lo;
      if (in_.peek() == '\\') {
        in_.advance();
        if (class_escape(ranges)) continue;
        lo = in_.peek() == 'b' ? (in_.advance(), 0x08u) : escaped_char();
      } else {
        lo = in_.next_codepoint();
      }
      uint32_t hi = lo;
      if (in_.peek() == '-' && in_.peek(1) != ']' && in_.peek(1) != '\0') {
        in_.advance();
        if (in_.peek() == '\\') {
          in_.advance();
          hi = escaped_char();
        } else {
          hi = in_.next_codepoint();
        }
        if (hi < lo) in_.fail("character range is out of order");
      }
      ranges.push_back({lo, hi});
    }
    if (!in_.consume("]")) in_.fail("missing ']'");
    return set(ranges, negated);
  }

  int32_t set(const Ranges& ranges, bool negated) {
    if (options_.json_string) return json_string_chars(g_, normalize_ranges(ranges, negated));
    return g_.codepoints(ranges, negated);
  }

  Grammar& g_;
  TextCursor in_;
  RegexOptions options_;
  size_t size_;
};

}  // namespace

int32_t regex_expression(Grammar& grammar, std::string_view pattern, const RegexOptions& options) {
  return RegexParser(grammar, pattern, options).parse();
}

Grammar parse_regex(std::string_view pattern) {
  Grammar g;
  g.set_root(g.add_rule("root", regex_expression(g, pattern)));
  return g;
}

}  // namespace qinfer::grammar
