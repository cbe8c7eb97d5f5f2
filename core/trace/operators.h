// The script language's operators, as the parser recognises them once: the interpreter switches
// on these instead of comparing spellings at every evaluation. symbol() spells one for messages.
#pragma once

#include <optional>
#include <string_view>

namespace shardscope::trace {

enum class UnaryOp { Not, Neg, Pos, Invert };
enum class BinaryOp {
  Add,
  Sub,
  Mul,
  Div,
  FloorDiv,
  Mod,
  Pow,
  MatMul,
  BitAnd,
  BitOr,
  BitXor,
  LShift,
  RShift
};
enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge, Is, IsNot, In, NotIn };

const char* symbol(UnaryOp op);
const char* symbol(BinaryOp op);
const char* symbol(CompareOp op);

// The operator spelled `text` ("+", "//", "not in", ...); none when no operator of that family is.
std::optional<UnaryOp> unaryOpOf(std::string_view text);
std::optional<BinaryOp> binaryOpOf(std::string_view text);
std::optional<CompareOp> compareOpOf(std::string_view text);

}  // namespace shardscope::trace
