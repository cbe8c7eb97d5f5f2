#include "lexer.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

namespace shardscope::trace {

ScriptError::ScriptError(const std::string& file, SourceLocation at, const std::string& statement,
                         const std::string& message)
    : Error(file + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " +
            message + (statement.empty() ? "" : "\n    " + statement)),
      at_(at),
      message_(message) {}

ScriptError::ScriptError(const std::string& text, SourceLocation at, std::string message)
    : Error(text), at_(at), message_(std::move(message)) {}

namespace {

class Lexer {
 public:
  Lexer(const std::string& src, const std::string& file) : s_(src), file_(file) {}

  std::vector<Token> run() {
    indents_.push_back(0);
    while (pos_ < s_.size()) {
      if (atLineStart_ && depth_ == 0) {
        if (handleIndent()) continue;
      }
      const char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
        continue;
      }
      if (c == '\\' && pos_ + 1 < s_.size() && s_[pos_ + 1] == '\n') {
        advance(2);
        continue;
      }
      if (c == '\n') {
        if (depth_ == 0 && !lastWasNewline()) push(TokenKind::Newline, "\n");
        advance(1);
        // Inside brackets a line goes on (implicit joining): no indent to measure. Leaving the
        // flag set there made the line that closes the brackets read as a blank one, its newline
        // lost.
        atLineStart_ = depth_ == 0;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
        advance(1);
        continue;
      }
      if (std::isdigit(uint8_t(c)) ||
          (c == '.' && pos_ + 1 < s_.size() && std::isdigit(uint8_t(s_[pos_ + 1])))) {
        number();
        continue;
      }
      if (std::isalpha(uint8_t(c)) || c == '_' || uint8_t(c) >= 0x80) {
        if (stringPrefix()) continue;
        name();
        continue;
      }
      if (c == '"' || c == '\'') {
        string(false, false, here());
        continue;
      }
      op();
    }
    if (!lastWasNewline() && !tokens_.empty()) push(TokenKind::Newline, "\n");
    while (indents_.size() > 1) {
      indents_.pop_back();
      push(TokenKind::Dedent, "");
    }
    push(TokenKind::End, "");
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) { throw ScriptError(file_, here(), "", what); }
  SourceLocation here() const { return {line_, int(pos_ - lineStart_) + 1}; }
  void advance(size_t n) {
    for (size_t i = 0; i < n && pos_ < s_.size(); ++i, ++pos_) {
      if (s_[pos_] == '\n') {
        ++line_;
        lineStart_ = pos_ + 1;
      }
    }
  }
  bool lastWasNewline() const {
    return tokens_.empty() || tokens_.back().kind == TokenKind::Newline ||
           tokens_.back().kind == TokenKind::Indent || tokens_.back().kind == TokenKind::Dedent;
  }
  void push(TokenKind k, std::string text, SourceLocation at = {}) {
    if (at.line == 0) at = here();
    tokens_.push_back({k, std::move(text), at});
  }

  // Measures indentation at a line start; returns true when the line is blank or a comment.
  bool handleIndent() {
    size_t p = pos_;
    int width = 0;
    while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) {
      width = s_[p] == '\t' ? (width / 8 + 1) * 8 : width + 1;
      ++p;
    }
    if (p >= s_.size() || s_[p] == '\n' || s_[p] == '#' || s_[p] == '\r') {
      while (p < s_.size() && s_[p] != '\n') ++p;
      advance(p - pos_);
      if (pos_ < s_.size()) advance(1);
      return true;
    }
    advance(p - pos_);
    atLineStart_ = false;
    if (width > indents_.back()) {
      indents_.push_back(width);
      push(TokenKind::Indent, "");
    } else {
      while (width < indents_.back()) {
        indents_.pop_back();
        push(TokenKind::Dedent, "");
      }
      if (width != indents_.back()) fail("unindent does not match any outer indentation level");
    }
    return false;
  }

  // A number literal, read as Python's tokenizer reads it: an underscore stands only between two
  // digits (or after a base prefix: 0x_ff), a prefixed literal needs a digit of its base, a
  // decimal integer has no leading zeros, and no letter follows a literal (`1abc`, `1e`). What
  // breaks one is Python's SyntaxError, at the character that breaks it.
  void number() {
    const SourceLocation at = here();
    size_t p = pos_;
    const auto failAt = [&](size_t q, const std::string& what) {
      throw ScriptError(file_, {line_, int(q - lineStart_) + 1}, "", what);
    };
    const auto isDigitOf = [](char c, int base) {
      if (base == 16) return std::isxdigit(uint8_t(c)) != 0;
      return c >= '0' && c < char('0' + base);
    };
    // Digits of `base` from p, single underscores allowed before each; returns them without the
    // underscores.
    const auto digitsOf = [&](int base, const std::string& kind) {
      std::string out;
      while (p < s_.size()) {
        if (s_[p] == '_') {
          if (p + 1 >= s_.size() || !isDigitOf(s_[p + 1], base))
            failAt(p, "invalid " + kind + " literal");
          ++p;
        } else if (isDigitOf(s_[p], base)) {
          out += s_[p++];
        } else {
          break;
        }
      }
      return out;
    };
    // What may follow a literal: not a letter, digit or underscore, except for the keywords
    // Python still accepts there (`1if x else 2`).
    const auto endOfLiteral = [&](const std::string& kind) {
      if (p >= s_.size()) return;
      const char c = s_[p];
      if (!std::isalnum(uint8_t(c)) && c != '_' && uint8_t(c) < 0x80) return;
      if (c == 'j' || c == 'J') failAt(p, "complex literals (1j) are not supported");
      size_t q = p;
      while (q < s_.size() && (std::isalnum(uint8_t(s_[q])) || s_[q] == '_')) ++q;
      static const std::set<std::string> keywords = {"and", "else", "for", "if",
                                                     "in",  "is",   "not", "or"};
      if (!keywords.count(s_.substr(p, q - p))) failAt(p, "invalid " + kind + " literal");
    };
    if (s_[p] == '0' && p + 1 < s_.size() && std::strchr("xXoObB", s_[p + 1])) {
      const char prefix = char(std::tolower(s_[p + 1]));
      const int base = prefix == 'x' ? 16 : prefix == 'o' ? 8 : 2;
      const std::string kind = base == 16 ? "hexadecimal" : base == 8 ? "octal" : "binary";
      p += 2;
      const std::string digits = digitsOf(base, kind);
      if (p < s_.size() && std::isdigit(uint8_t(s_[p])))
        failAt(p, "invalid digit '" + std::string(1, s_[p]) + "' in " + kind + " literal");
      if (digits.empty()) failAt(p, "invalid " + kind + " literal");
      endOfLiteral(kind);
      Token t{TokenKind::Int, s_.substr(pos_, p - pos_), at};
      try {
        t.intValue = std::stoll(digits, nullptr, base);
      } catch (const std::exception&) {
        fail("integer literal '" + t.text + "' is out of range (64-bit)");
      }
      tokens_.push_back(t);
      advance(p - pos_);
      return;
    }
    std::string digits = digitsOf(10, "decimal");  // empty for `.5`
    bool isFloat = false;
    if (p < s_.size() && s_[p] == '.') {
      isFloat = true;
      digits += '.';
      ++p;
      if (p < s_.size() && s_[p] == '_') failAt(p, "invalid decimal literal");
      digits += digitsOf(10, "decimal");
    }
    if (p + 1 < s_.size() && (s_[p] == 'e' || s_[p] == 'E')) {
      const size_t sign = (s_[p + 1] == '-' || s_[p + 1] == '+') ? 1 : 0;
      if (p + 1 + sign < s_.size() && std::isdigit(uint8_t(s_[p + 1 + sign]))) {
        isFloat = true;
        digits += 'e';
        if (sign) digits += s_[p + 1];
        p += 1 + sign;
        digits += digitsOf(10, "decimal");
      }
    }
    endOfLiteral("decimal");
    if (!isFloat && digits.size() > 1 && digits[0] == '0' &&
        digits.find_first_not_of('0') != std::string::npos) {
      failAt(pos_,
             "leading zeros in decimal integer literals are not permitted; use an 0o prefix for "
             "octal integers");
    }
    Token t{isFloat ? TokenKind::Float : TokenKind::Int, s_.substr(pos_, p - pos_), at};
    try {
      if (isFloat) {
        // strtod, not stod: as in Python, 1e400 reads as inf and 5e-324 (subnormal) as itself,
        // where stod refuses both as out of range.
        t.floatValue = std::strtod(digits.c_str(), nullptr);
      } else {
        t.intValue = std::stoll(digits);
      }
    } catch (const std::exception&) {
      fail("number '" + t.text + "' is out of range");
    }
    tokens_.push_back(t);
    advance(p - pos_);
  }

  bool stringPrefix() {
    const SourceLocation start = here();
    size_t p = pos_;
    bool f = false, raw = false;
    while (p < s_.size() && p - pos_ < 2 && std::strchr("fFrRbBuU", s_[p])) {
      if (s_[p] == 'f' || s_[p] == 'F') f = true;
      if (s_[p] == 'r' || s_[p] == 'R') raw = true;
      ++p;
    }
    if (p == pos_ || p >= s_.size() || (s_[p] != '"' && s_[p] != '\'')) return false;
    advance(p - pos_);
    string(f, raw, start);
    return true;
  }

  // A string literal from its quote at pos_; `at`: where it starts, its prefix included.
  void string(bool fstring, bool raw, SourceLocation at) {
    const char q = s_[pos_];
    const bool triple = s_.compare(pos_, 3, std::string(3, q)) == 0;
    advance(triple ? 3 : 1);
    std::string out;
    std::vector<SourceLocation> charAt;
    const auto placed = [&](SourceLocation from) {  // the characters out gained stand at `from`
      if (fstring) charAt.resize(out.size(), from);
    };
    for (;;) {
      if (pos_ >= s_.size()) throw ScriptError(file_, at, "", "unterminated string literal");
      const char c = s_[pos_];
      if (triple ? s_.compare(pos_, 3, std::string(3, q)) == 0 : c == q) {
        advance(triple ? 3 : 1);
        break;
      }
      if (c == '\n' && !triple)
        throw ScriptError(file_, at, "",
                          "unterminated string literal (use triple quotes for several lines)");
      const SourceLocation from = here();
      if (c == '\\' && !raw && pos_ + 1 < s_.size()) {
        std::string decoded;
        escape(decoded);
        // In an f-string an escaped brace is a literal one, not a field's: doubled here, as the
        // f-string parser reads a literal brace.
        if (fstring && (decoded == "{" || decoded == "}")) decoded += decoded;
        out += decoded;
        placed(from);
        continue;
      }
      out += c;
      placed(from);
      advance(1);
    }
    Token t{fstring ? TokenKind::FString : TokenKind::String, out, at};
    t.charAt = std::move(charAt);
    tokens_.push_back(std::move(t));
  }

  // The escape sequence at pos_ (a backslash), decoded into `out` as Python decodes it; an escape
  // Python does not know keeps its backslash ("\\q" is two characters).
  void escape(std::string& out) {
    const char e = s_[pos_ + 1];
    static const std::string simple = "nrtabfv\\'\"";
    static const std::string meaning = "\n\r\t\a\b\f\v\\'\"";
    if (const size_t k = simple.find(e); k != std::string::npos) {
      out += meaning[k];
    } else if (e >= '0' && e <= '7') {  // \ooo: up to three octal digits
      size_t n = 1;
      while (n < 3 && pos_ + 1 + n < s_.size() && s_[pos_ + 1 + n] >= '0' &&
             s_[pos_ + 1 + n] <= '7')
        ++n;
      const unsigned code = unsigned(std::stoul(s_.substr(pos_ + 1, n), nullptr, 8));
      appendUtf8(out, code);
      advance(1 + n);
      return;
    } else if (e == 'x' || e == 'u' || e == 'U') {  // \xhh, \uhhhh, \Uhhhhhhhh
      const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      const std::string hex = s_.substr(pos_ + 2, n);
      if (hex.size() != n ||
          !std::all_of(hex.begin(), hex.end(), [](char h) { return std::isxdigit(uint8_t(h)); }))
        fail(std::string("truncated \\") + e + " escape: it takes " + std::to_string(n) +
             " hexadecimal digits");
      const unsigned long code = std::stoul(hex, nullptr, 16);
      if (code > 0x10FFFF) fail("\\U escape beyond the last Unicode code point (10FFFF)");
      appendUtf8(out, unsigned(code));
      advance(2 + n);
      return;
    } else if (e != '\n') {  // a backslash before a newline joins the lines
      out += '\\';
      out += e;
    }
    advance(2);
  }

  // Code point `code` in UTF-8, the encoding of the script's strings.
  static void appendUtf8(std::string& out, unsigned code) {
    if (code < 0x80) {
      out += char(code);
    } else if (code < 0x800) {
      out += char(0xC0 | (code >> 6));
      out += char(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += char(0xE0 | (code >> 12));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    } else {
      out += char(0xF0 | (code >> 18));
      out += char(0x80 | ((code >> 12) & 0x3F));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    }
  }

  void name() {
    const SourceLocation at = here();
    size_t p = pos_;
    while (p < s_.size() &&
           (std::isalnum(uint8_t(s_[p])) || s_[p] == '_' || uint8_t(s_[p]) >= 0x80))
      ++p;
    tokens_.push_back({TokenKind::Name, s_.substr(pos_, p - pos_), at});
    advance(p - pos_);
  }

  void op() {
    static const char* ops[] = {
        "**=", "//=", ">>=", "<<=", "...", "**", "//", "==", "!=", "<=", ">=", "->",
        "+=",  "-=",  "*=",  "/=",  "%=",  "@=", "&=", "|=", "^=", "<<", ">>", ":=",
        "+",   "-",   "*",   "/",   "%",   "@",  "<",  ">",  "=",  "(",  ")",  "[",
        "]",   "{",   "}",   ",",   ":",   ".",  ";",  "~",  "&",  "|",  "^"};
    for (const char* o : ops) {
      const size_t n = std::strlen(o);
      if (s_.compare(pos_, n, o) == 0) {
        if (std::strchr("([{", o[0]) && n == 1) ++depth_;
        if (std::strchr(")]}", o[0]) && n == 1 && depth_ > 0) --depth_;
        push(TokenKind::Op, o);
        advance(n);
        return;
      }
    }
    fail(std::string("unexpected character '") + s_[pos_] + "'");
  }

  const std::string& s_;
  const std::string& file_;
  size_t pos_ = 0, lineStart_ = 0;
  int line_ = 1;
  int depth_ = 0;
  bool atLineStart_ = true;
  std::vector<int> indents_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const std::string& file) {
  return Lexer(source, file).run();
}

}  // namespace shardscope::trace
