#include "operators.h"

#include <array>
#include <utility>

namespace shardscope::trace {
namespace {

constexpr std::array<std::pair<UnaryOp, const char*>, 4> kUnary{{
    {UnaryOp::Not, "not"},
    {UnaryOp::Neg, "-"},
    {UnaryOp::Pos, "+"},
    {UnaryOp::Invert, "~"},
}};
constexpr std::array<std::pair<BinaryOp, const char*>, 13> kBinary{{
    {BinaryOp::Add, "+"},
    {BinaryOp::Sub, "-"},
    {BinaryOp::Mul, "*"},
    {BinaryOp::Div, "/"},
    {BinaryOp::FloorDiv, "//"},
    {BinaryOp::Mod, "%"},
    {BinaryOp::Pow, "**"},
    {BinaryOp::MatMul, "@"},
    {BinaryOp::BitAnd, "&"},
    {BinaryOp::BitOr, "|"},
    {BinaryOp::BitXor, "^"},
    {BinaryOp::LShift, "<<"},
    {BinaryOp::RShift, ">>"},
}};
constexpr std::array<std::pair<CompareOp, const char*>, 10> kCompare{{
    {CompareOp::Eq, "=="},
    {CompareOp::Ne, "!="},
    {CompareOp::Lt, "<"},
    {CompareOp::Le, "<="},
    {CompareOp::Gt, ">"},
    {CompareOp::Ge, ">="},
    {CompareOp::Is, "is"},
    {CompareOp::IsNot, "is not"},
    {CompareOp::In, "in"},
    {CompareOp::NotIn, "not in"},
}};

template <typename Op, size_t N>
const char* spell(const std::array<std::pair<Op, const char*>, N>& table, Op op) {
  for (const auto& [o, s] : table) {
    if (o == op) return s;
  }
  return "?";
}

template <typename Op, size_t N>
std::optional<Op> find(const std::array<std::pair<Op, const char*>, N>& table,
                       std::string_view text) {
  for (const auto& [o, s] : table) {
    if (text == s) return o;
  }
  return std::nullopt;
}

}  // namespace

const char* symbol(UnaryOp op) {
  return spell(kUnary, op);
}
const char* symbol(BinaryOp op) {
  return spell(kBinary, op);
}
const char* symbol(CompareOp op) {
  return spell(kCompare, op);
}

std::optional<UnaryOp> unaryOpOf(std::string_view text) {
  return find(kUnary, text);
}
std::optional<BinaryOp> binaryOpOf(std::string_view text) {
  return find(kBinary, text);
}
std::optional<CompareOp> compareOpOf(std::string_view text) {
  return find(kCompare, text);
}

}  // namespace shardscope::trace
