// Syntax tree of the trace language. One node type per layer (expressions, statements); fields
// are shared among kinds to keep the tree flat and the interpreter a single switch per layer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "operators.h"
#include "source_location.h"

namespace shardscope::trace {

struct Expr;
struct Stmt;
using ExprPtr = std::shared_ptr<Expr>;
using StmtPtr = std::shared_ptr<Stmt>;
using Block = std::vector<StmtPtr>;

enum class ExprKind {
  Name,
  Int,
  Float,
  Str,
  Bool,
  None,
  FString,
  Tuple,
  List,
  Dict,
  Attribute,
  Subscript,
  Slice,
  Call,
  Unary,
  Binary,
  Compare,
  And,
  Or,
  IfElse,
  Lambda,
  Ellipsis,
  Comprehension,  // [x for ...], {k: v for ...}, (x for ...): a function of its first iterable
  Starred         // *a in f(*a), [*a, 1], `first, *rest = ...`: the iterable in a
};

struct Param {
  // How a call fills it, as in Python: by position or keyword; by position only (before `/`);
  // by keyword only (after `*` or `*args`); with the positional arguments left over, as a tuple
  // (`*args`); with the keyword arguments left over, as a dict (`**kwargs`).
  enum class Kind { PositionalOrKeyword, PositionalOnly, KeywordOnly, VarPositional, VarKeyword };
  std::string name;
  ExprPtr defaultValue;  // null: required
  Kind kind = Kind::PositionalOrKeyword;
};

struct Expr {
  ExprKind kind;
  SourceLocation at;
  SourceLocation openParen;           // where the parentheses around it open (line 0: none)
  std::string text;                   // Name, Str, Attribute name
  long long intValue = 0;             // Int, Bool
  double floatValue = 0;              // Float
  ExprPtr a, b, c;                    // operands; Attribute/Subscript/Call object in a
  std::vector<ExprPtr> items;         // Tuple, List, Dict keys (null: `**values[i]`), Call args,
                                      // Compare operands, FString exprs
  std::vector<ExprPtr> values;        // Dict values; FString: each field's spec when it
                                      // has fields of its own (an FString), else null
  std::vector<std::string> names;     // Call keyword names (parallel to values; "**":
                                      // a mapping unpacked),
                                      // FString literal parts (items.size() + 1)
  UnaryOp unaryOp = UnaryOp::Not;     // Unary
  BinaryOp binaryOp = BinaryOp::Add;  // Binary
  std::vector<CompareOp> compareOps;  // Compare (between items)
  std::vector<std::string> formats;   // FString: "!r", ":.3f" per expression
  std::vector<Param> params;          // Lambda; Comprehension: its one parameter
  std::vector<std::shared_ptr<Stmt>> body;  // Comprehension: the loops that build its result
};

enum class StmtKind {
  Expr,
  Assign,
  AugAssign,
  If,
  For,
  While,
  Def,
  Return,
  With,
  Pass,
  Break,
  Continue,
  Import,
  Assert,
  Del
};

// Line `line` (from 1) of `lines` without its indentation; "" past them.
inline std::string lineText(const std::vector<std::string>& lines, int line) {
  if (line < 1 || line > int(lines.size())) return "";
  std::string l = lines[size_t(line - 1)];
  l.erase(0, l.find_first_not_of(" \t"));
  return l;
}

struct Stmt {
  StmtKind kind;
  SourceLocation at;
  // The program's lines, shared by its statements (a copy each grew with the square of a line
  // that holds many), for errors: source() is the statement's first line.
  std::shared_ptr<const std::vector<std::string>> lines;
  std::vector<ExprPtr> targets;    // Assign (a = b = v), For target, With "as" target, Del
  ExprPtr value;                   // expression, condition, iterable, with-expression, return value
  ExprPtr message;                 // Assert
  std::string op;                  // Def name, Import module
  BinaryOp augOp = BinaryOp::Add;  // AugAssign (`+=`: Add)
  std::vector<std::string> names;  // Import: imported names
  std::vector<Param> params;       // Def
  Block body, orElse;

  std::string source() const { return lines ? lineText(*lines, at.line) : std::string(); }
};

struct Program {
  std::string file;
  std::string source;
  Block body;
};

// Throws ScriptError with file, line and column.
std::shared_ptr<Program> parseProgram(const std::string& source, const std::string& file);

}  // namespace shardscope::trace
