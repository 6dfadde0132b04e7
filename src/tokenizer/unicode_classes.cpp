#include "tokenizer/unicode_classes.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "util/error.h"
#include "util/utf8.h"

namespace qinfer::unicode {
namespace {

bool is_oniguruma_space(char32_t cp, utf8proc_category_t category) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x85 || category == UTF8PROC_CATEGORY_ZS ||
         category == UTF8PROC_CATEGORY_ZL || category == UTF8PROC_CATEGORY_ZP;
}

CharClass classify_slow(char32_t cp) {
  if (cp == '\r' || cp == '\n') return CharClass::kNewline;
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  switch (category) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return CharClass::kLetter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return CharClass::kNumber;
    default:
      return is_oniguruma_space(cp, category) ? CharClass::kSpace : CharClass::kOther;
  }
}

// ASCII classes computed once from the same tables (a constant after construction, not mutable state).
struct AsciiClasses {
  CharClass table[128];
  AsciiClasses() {
    for (char32_t cp = 0; cp < 128; ++cp) table[cp] = classify_slow(cp);
  }
};

const AsciiClasses& ascii_classes() {
  static const AsciiClasses classes;
  return classes;
}

// A code point NFC leaves alone whatever surrounds it: canonical combining class 0, no canonical decomposition,
// never the second half of a canonical composition, and not a conjoining Hangul jamo.
bool is_stable_starter(char32_t cp) {
  if (cp < 0x300) return true;
  if (cp >= 0x1100 && cp < 0x1200) return false;
  const utf8proc_property_t* property = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  if (property->combining_class != 0) return false;
  if (property->decomp_seqindex != UINT16_MAX && property->decomp_type == 0) return false;
  if (property->comb_index != UINT16_MAX && property->comb_index >= 0x8000) return false;
  return true;
}

}  // namespace

CharClass classify(char32_t cp) {
  if (cp < 128) return ascii_classes().table[cp];
  return classify_slow(cp);
}

bool is_word_char(char32_t cp) {
  if (cp == 0x200C || cp == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

bool is_white_space(char32_t cp) {
  return is_oniguruma_space(cp, utf8proc_category(static_cast<utf8proc_int32_t>(cp)));
}

bool is_nfc_stable(std::string_view valid_utf8) {
  size_t pos = 0;
  while (pos < valid_utf8.size()) {
    if (static_cast<unsigned char>(valid_utf8[pos]) < 0xCC) {  // lead bytes below 0xCC encode code points < U+0300
      ++pos;
      continue;
    }
    if (!is_stable_starter(utf8::decode_valid(valid_utf8, pos))) return false;
  }
  return true;
}

std::string to_nfc(std::string_view valid_utf8) {
  utf8proc_uint8_t* mapped = nullptr;
  const auto options = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  const utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid_utf8.data()),
                                               static_cast<utf8proc_ssize_t>(valid_utf8.size()), &mapped, options);
  if (length < 0) throw Error(ErrorKind::kInvalidArgument, std::string("NFC failed: ") + utf8proc_errmsg(length));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owner(mapped, &std::free);
  return std::string(reinterpret_cast<const char*>(mapped), static_cast<size_t>(length));
}

}  // namespace qinfer::unicode
