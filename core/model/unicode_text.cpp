#include "unicode_text.h"

#include <utf8proc.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "../error.h"

namespace shardscope {
namespace {

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

// Length of the valid UTF-8 sequence at s[i], or 0.
size_t sequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return uint8_t(s[i + k]); };
  const uint8_t c = b(0);
  const size_t left = s.size() - i;
  if (c < 0x80) return 1;
  const auto cont = [&](size_t k) { return k < left && (b(k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;  // overlong
    if (c == 0xED && b(1) > 0x9F) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;
    if (c == 0xF4 && b(1) > 0x8F) return 0;
    return 4;
  }
  return 0;
}

// The byte-level alphabet's code points are all below this (the last is 256 + 67).
constexpr uint32_t kByteLevelCodePoints = 324;

struct ByteLevelTables {
  std::array<std::string, 256> toUtf8;
  // A flat table (-1: not in the alphabet): decoding runs right after a forward has evicted the
  // caches, where a hash map's buckets and nodes cost a memory round trip each.
  std::array<int16_t, kByteLevelCodePoints> fromCodePoint;

  ByteLevelTables() {
    fromCodePoint.fill(-1);
    // GPT-2: printable Latin-1 bytes map to themselves, the rest to 256 + n in order.
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? uint32_t(b) : uint32_t(256 + n++);
      appendUtf8(toUtf8[b], cp);
      fromCodePoint[cp] = int16_t(b);
    }
  }
};

const ByteLevelTables& tables() {
  static const ByteLevelTables t;
  return t;
}

}  // namespace

size_t findInvalidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = sequenceLength(s, i);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string replaceInvalidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = sequenceLength(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string normalizeUnicode(std::string_view s, NormalForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::NFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::NFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::NFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::NFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* raw = nullptr;
  const auto len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                utf8proc_ssize_t(s.size()), &raw, utf8proc_option_t(options));
  std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(raw, &std::free);
  if (len < 0) throw Error(std::string("Unicode normalisation failed: ") + utf8proc_errmsg(len));
  return std::string(reinterpret_cast<const char*>(raw), size_t(len));
}

const std::array<std::string, 256>& byteToUtf8() {
  return tables().toUtf8;
}

std::string bytesToByteLevel(std::string_view bytes) {
  const auto& t = tables().toUtf8;
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) out += t[c];
  return out;
}

bool byteLevelToBytes(std::string_view text, std::string& out) {
  const auto& table = tables().fromCodePoint;
  for (size_t i = 0; i < text.size();) {
    // The alphabet's code points take one or two UTF-8 bytes: longer or invalid ones are not in it.
    const size_t n = sequenceLength(text, i);
    if (n != 1 && n != 2) return false;
    const auto b0 = uint8_t(text[i]);
    const uint32_t cp = n == 1 ? b0 : (uint32_t(b0 & 0x1F) << 6) | (uint8_t(text[i + 1]) & 0x3F);
    if (cp >= kByteLevelCodePoints || table[cp] < 0) return false;
    out.push_back(char(table[cp]));
    i += n;
  }
  return true;
}

}  // namespace shardscope
