// How a tokenizer.json's pre-tokenizers cut text into pieces before BPE: Hugging Face's Split
// (a regex and what to do with its matches) and ByteLevel (GPT-2's regex, an optional prefix
// space), with the PCRE2 pattern both use.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "../error.h"

namespace shardscope {

// GPT-2's split, used by ByteLevel when use_regex is true.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Pcre2CodeFree {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct Pcre2MatchDataFree {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

// A PCRE2 pattern compiled once (UTF-8, Unicode properties, JIT when available), matched left to
// right over pieces of text as Hugging Face's tokenizers crate matches with onig.
class PreTokenizerRegex {
 public:
  PreTokenizerRegex(const std::string& pattern, bool literal, const std::string& where);

  // Calls fn(begin, end) for every match, left to right.
  template <class F>
  void forEachMatch(std::string_view s, F&& fn) const {
    std::unique_ptr<pcre2_match_data, Pcre2MatchDataFree> md(
        pcre2_match_data_create_from_pattern(code_.get(), nullptr));
    size_t offset = 0;
    while (offset <= s.size()) {
      const int rc = pcre2_match(code_.get(), reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(),
                                 offset, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) return;
      if (rc < 0) throw Error("tokenizer regex failed with PCRE2 error " + std::to_string(rc));
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      const size_t b = ov[0], e = ov[1];
      if (e > b) fn(b, e);
      if (e > b) {
        offset = e;
      } else {  // empty match: step over one character
        if (e >= s.size()) return;
        offset = e + 1;
        while (offset < s.size() && (uint8_t(s[offset]) & 0xC0) == 0x80) ++offset;
      }
    }
  }

 private:
  std::unique_ptr<pcre2_code, Pcre2CodeFree> code_;
};

enum class SplitBehavior { Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous };

struct SplitStep {
  std::shared_ptr<PreTokenizerRegex> regex;
  SplitBehavior behavior;
};
struct ByteLevelStep {
  bool addPrefixSpace = false;
  bool useRegex = true;
};
using PreTokenizerStep = std::variant<SplitStep, ByteLevelStep>;

// The pieces `piece` falls into under a Split step, by its behaviour (Hugging Face's
// SplitDelimiterBehavior).
std::vector<std::string> splitPiece(const std::string& piece, const SplitStep& step);

}  // namespace shardscope
