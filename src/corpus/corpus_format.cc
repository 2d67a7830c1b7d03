#include "corpus/corpus_format.h"

namespace lmdbloader {

bool IsMetaKey(std::string_view key) {
  return key.substr(0, kMetaPrefix.size()) == kMetaPrefix;
}

bool IsUtf8(std::string_view text) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned min;
    if ((c & 0xe0) == 0xc0) len = 2, min = 0x80, c &= 0x1f;
    else if ((c & 0xf0) == 0xe0) len = 3, min = 0x800, c &= 0x0f;
    else if ((c & 0xf8) == 0xf0) len = 4, min = 0x10000, c &= 0x07;
    else return false;
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xc0) != 0x80) return false;
      c = (c << 6) | (p[i + k] & 0x3f);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

std::string PrintableName(std::string_view name) {
  constexpr size_t kShown = 64;
  const std::string_view shown = name.substr(0, kShown);
  const char* more = name.size() > kShown ? "..." : "";
  bool printable = IsUtf8(name);
  for (unsigned char c : shown) printable = printable && c >= 0x20 && c != 0x7f;
  if (printable) return "'" + std::string(shown) + "'" + more;
  static const char kDigits[] = "0123456789abcdef";
  std::string hex = "0x";
  for (unsigned char c : shown) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 15];
  }
  return hex + more;
}

}  // namespace lmdbloader
