// How values print: Python's repr and str of script values (a value that holds itself as
// [...]); tensors print as torch prints them (tensor_repr.cpp).
#include <algorithm>
#include <cstdio>

#include "dict_view.h"
#include "format_spec.h"
#include "utf8_text.h"
#include "value.h"

namespace shardscope::trace {

namespace {

// Python's repr of a float: formatting with an empty spec is exactly repr (shortest digits,
// fixed notation only for exponents -4 .. 15: 0.0001 and 1000000000000000.0, not 1e-04 and 1e+15).
std::string floatRepr(double d) {
  return formatFloat(d, FormatSpec{});
}

std::string strRepr(const std::string& s) {
  const bool useDouble = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = useDouble ? '"' : '\'';
  std::string o(1, q);
  for (unsigned char c : s) {
    if (c == '\\')
      o += "\\\\";
    else if (c == '\n')
      o += "\\n";
    else if (c == '\t')
      o += "\\t";
    else if (c == '\r')
      o += "\\r";
    else if (c == q)
      o += std::string("\\") + char(q);
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      o += b;
    } else
      o += char(c);
  }
  return o + q;
}

std::string reprOf(const Value& v) {
  switch (v->type) {
    case Type::None:
      return "None";
    case Type::Bool:
      return v->boolValue ? "True" : "False";
    case Type::Int:
      return std::to_string(v->intValue);
    case Type::Float:
      return floatRepr(v->floatValue);
    case Type::Str:
      return strRepr(v->str);
    case Type::Tuple: {
      if (v->fields && v->fields->size() == v->items.size()) {  // as torch prints a return type
        std::string s = v->str + "(";
        for (size_t i = 0; i < v->items.size(); ++i)
          s += (i ? ",\n" : "\n") + (*v->fields)[i] + "=" + repr(v->items[i]);
        return s + ")";
      }
      std::string s = "(";
      for (size_t i = 0; i < v->items.size(); ++i) s += (i ? ", " : "") + repr(v->items[i]);
      return s + (v->items.size() == 1 ? ",)" : ")");
    }
    case Type::List: {
      std::string s = "[";
      for (size_t i = 0; i < v->items.size(); ++i) s += (i ? ", " : "") + repr(v->items[i]);
      return s + "]";
    }
    case Type::Size: {
      std::string s = "torch.Size([";
      for (size_t i = 0; i < v->items.size(); ++i) s += (i ? ", " : "") + repr(v->items[i]);
      return s + "])";
    }
    case Type::Dict: {
      std::string s = "{";
      for (size_t i = 0; i < v->dict.size(); ++i)
        s += (i ? ", " : "") + repr(v->dict[i].first) + ": " + repr(v->dict[i].second);
      return s + "}";
    }
    case Type::DictKeys:
    case Type::DictValues:
    case Type::DictItems:
      return viewRepr(*v);
    case Type::Slice:
      return "slice(" + repr(v->items[0]) + ", " + repr(v->items[1]) + ", " + repr(v->items[2]) +
             ")";
    case Type::Range:
      return "range(" + std::to_string(v->rangeStart) + ", " + std::to_string(v->rangeStop) +
             (v->rangeStep != 1 ? ", " + std::to_string(v->rangeStep) : "") + ")";
    case Type::Deferred:  // computed to be shown
      resolve(v);
      return formatTensor(v->tensor);
    case Type::Tensor:
      return formatTensor(v->tensor);
    case Type::Function:
      return "<function " + v->function->qualifiedName + ">";
    case Type::Builtin:
      if (v->pythonClass) return "<class '" + v->str + "'>";
      return "<built-in function " + v->str + ">";
    case Type::Module:
      return "<module " + v->str + ">";
    case Type::Tracer:
      return "<Tracer>";
    case Type::IterRange:
      return "<tracer.iter>";
    case Type::Namespace:
      return v->attributes.empty() ? v->str : "<module '" + v->str + "'>";  // dtypes print bare
    case Type::Ellipsis:
      return "Ellipsis";
    case Type::Device: {  // device(type='cuda', index=0), as torch prints one
      const c10::Device d(v->str);
      return "device(type='" + c10::DeviceTypeName(d.type(), /*lower_case=*/true) + "'" +
             (d.has_index() ? ", index=" + std::to_string(d.index()) : "") + ")";
    }
    case Type::Unsaved:
      return "<unsaved " + v->str + ">";
    case Type::ResultObject: {
      std::string s = v->str + "(";
      bool first = true;
      for (const auto& [k, a] : v->attributes) {
        s += (first ? "" : ", ") + k + "=" + repr(a);
        first = false;
      }
      return s + ")";
    }
  }
  return "?";
}

}  // namespace

std::string repr(const Value& v) {
  // A container met again inside itself prints as Python prints it ([...], (...), {...}; a view
  // inside itself: ...), not forever.
  const bool container = v->type == Type::List || v->type == Type::Tuple || v->type == Type::Dict ||
                         isDictView(v->type);
  if (!container) return reprOf(v);
  thread_local std::vector<const Object*> open;
  if (std::find(open.begin(), open.end(), v.get()) != open.end()) {
    return v->type == Type::List    ? "[...]"
           : v->type == Type::Tuple ? "(...)"
           : v->type == Type::Dict  ? "{...}"
                                    : "...";
  }
  NestingGuard nest(
      "while getting the repr of an object: it nests lists, tuples or dicts too deeply (1000 "
      "levels at most)");
  open.push_back(v.get());
  struct Close {
    ~Close() { open.pop_back(); }
  } close;
  return reprOf(v);
}

std::string ascii(const Value& v) {
  const std::string text = repr(v);
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (uint8_t(text[i]) < 0x80) {
      out += text[i++];
      continue;
    }
    // A well-formed UTF-8 sequence is its code point; any other byte (strings are bytes: an
    // overlong form, a surrogate, a stray continuation byte) is itself, as \x.
    size_t length = 1;
    const char32_t code = codePointAt(text, i, &length);
    char escape[12];
    std::snprintf(escape, sizeof escape,
                  code < 0x100     ? "\\x%02x"
                  : code < 0x10000 ? "\\u%04x"
                                   : "\\U%08x",
                  unsigned(code));
    out += escape;
    i += length;
  }
  return out;
}

std::string str(const Value& v) {
  return v->type == Type::Str || v->type == Type::Device ? v->str : repr(v);
}

}  // namespace shardscope::trace
