// UTF-8 helpers for the tokenizer: validation with the offending byte offset, Unicode
// normalisation (through utf8proc), and GPT-2's byte-level alphabet (each byte mapped to a
// printable code point so that byte strings can live in a JSON vocabulary).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace shardscope {

// Offset of the first byte that is not valid UTF-8, or npos.
size_t findInvalidUtf8(std::string_view s);

enum class NormalForm { NFC, NFD, NFKC, NFKD };
std::string normalizeUnicode(std::string_view s, NormalForm form);

// Replaces invalid sequences with U+FFFD (used when decoded bytes end mid-character).
std::string replaceInvalidUtf8(std::string_view s);

// The byte-level alphabet: byteToUtf8()[b] is the UTF-8 of the code point byte b maps to.
const std::array<std::string, 256>& byteToUtf8();
std::string bytesToByteLevel(std::string_view bytes);
// Inverse; returns false if some code point is not in the alphabet.
bool byteLevelToBytes(std::string_view text, std::string& out);

}  // namespace shardscope
