#include "pre_tokenizer.h"

namespace shardscope {

PreTokenizerRegex::PreTokenizerRegex(const std::string& pattern, bool literal,
                                     const std::string& where) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options =
      PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : 0);
  code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                            &err, &offset, nullptr));
  if (!code_) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(where + ": regex does not compile at offset " + std::to_string(offset) + ": " +
                reinterpret_cast<const char*>(msg));
  }
  pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE);  // optional speed-up; falls back silently
}

std::vector<std::string> splitPiece(const std::string& piece, const SplitStep& step) {
  struct Segment {
    size_t b, e;
    bool match;
  };
  std::vector<Segment> segs;
  size_t last = 0;
  step.regex->forEachMatch(piece, [&](size_t b, size_t e) {
    if (b > last) segs.push_back({last, b, false});
    segs.push_back({b, e, true});
    last = e;
  });
  if (last < piece.size()) segs.push_back({last, piece.size(), false});
  std::vector<std::string> out;
  const auto text = [&](const Segment& s) { return piece.substr(s.b, s.e - s.b); };
  switch (step.behavior) {
    case SplitBehavior::Isolated:
      for (const auto& s : segs) out.push_back(text(s));
      break;
    case SplitBehavior::Removed:
      for (const auto& s : segs) {
        if (!s.match) out.push_back(text(s));
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const auto& s : segs) {
        if (s.match && !out.empty()) {
          out.back() += text(s);
        } else {
          out.push_back(text(s));
        }
      }
      break;
    case SplitBehavior::MergedWithNext: {
      std::string pending;
      for (const auto& s : segs) {
        if (s.match) {
          pending += text(s);
        } else {
          out.push_back(pending + text(s));
          pending.clear();
        }
      }
      if (!pending.empty()) out.push_back(pending);
      break;
    }
    case SplitBehavior::Contiguous: {
      bool lastMatch = false;
      for (const auto& s : segs) {
        if (s.match && lastMatch) {
          out.back() += text(s);
        } else {
          out.push_back(text(s));
        }
        lastMatch = s.match;
      }
      break;
    }
  }
  return out;
}

}  // namespace shardscope
