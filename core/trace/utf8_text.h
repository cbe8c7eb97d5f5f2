// The trace language's strings are bytes, mostly well-formed UTF-8; Python's are code points. What
// a length, a padding or an error that quotes a character and its index needs to count them as
// Python does.
#pragma once

#include <cstddef>
#include <string_view>

namespace shardscope::trace {

// Length in bytes of the UTF-8 sequence that starts with `lead` (1 for a byte that cannot lead).
inline size_t utf8Length(unsigned char lead) {
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC2 && lead < 0xE0) return 2;
  return 1;
}

// The characters of `s`: its bytes that do not continue a sequence.
inline size_t codePoints(std::string_view s) {
  size_t n = 0;
  for (const unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The bytes of the first `n` characters of s (all of s when it has fewer): a prefix that does not
// cut a character, as Python's s[:n] or '%.3s' takes it.
inline size_t prefixOf(std::string_view s, size_t n) {
  size_t i = 0;
  for (size_t seen = 0; i < s.size() && seen < n; ++seen) {
    ++i;
    while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  }
  return i;
}

// The code point of the well-formed UTF-8 sequence at s[i] (utf8proc's reading), and its length
// in bytes; any other byte there (an overlong form, a surrogate, a stray or cut-off byte) is
// itself, one byte long.
char32_t codePointAt(std::string_view s, size_t i, size_t* length);

}  // namespace shardscope::trace
