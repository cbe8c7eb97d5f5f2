// Tensors printed as torch prints them (torch/_tensor_str.py with its default print options), so
// that a script's output reads as it would under nnsight: one element format chosen from all the
// printed values (integers, integral floats as `1.`, fixed `0.1235` or scientific `1.2346e-05` when
// the magnitudes span more than 1000x, pass 1e8 or fall below 1e-4), padded to one width, vectors
// wrapped at 80 columns, and tensors of more than 1000 elements summarized to 3 at each end.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "interpreter.h"
#include "value.h"

namespace shardscope::trace {
namespace {

constexpr int kPrecision = 4;
constexpr int64_t kThreshold = 1000;  // more elements than this: summarized
constexpr int64_t kEdgeItems = 3;
constexpr int kLineWidth = 80;

// An element as printed: floating ones as doubles (float32, float16 and bfloat16 exactly), the
// others exactly as int64.
struct Element {
  double f = 0;
  int64_t i = 0;
};

// `v` written with printf's `format` (one `*` precision and one double), as Python's format()
// writes finite values.
std::string printed(const char* format, int precision, double v) {
  char b[512];
  std::snprintf(b, sizeof b, format, precision, v);
  return b;
}

// What the elements print as (torch's _Formatter), chosen from every element that prints: the
// kind, and for floats whether all are integral (`1.`) or need scientific notation, and the width
// every element is padded to.
class ElementFormat {
 public:
  ElementFormat(const at::Tensor& t, const std::vector<Element>& values) {
    if (!at::isFloatingType(t.scalar_type())) {
      kind_ = t.scalar_type() == at::kBool ? Kind::Bool : Kind::Int;
      for (const Element& e : values) width_ = std::max(width_, int(unpadded(e).size()));
      return;
    }
    kind_ = Kind::Float;
    double lo = INFINITY, hi = 0;
    bool any = false;
    for (const Element& e : values) {
      const double v = e.f;
      if (!std::isfinite(v) || v == 0) continue;
      any = true;
      lo = std::min(lo, std::fabs(v));
      hi = std::max(hi, std::fabs(v));
      integral_ = integral_ && v == std::ceil(v);
    }
    if (!any) return;  // only zeros and non-finite values: `0.`, `inf`, `nan`
    sci_ = hi / lo > 1000.0 || hi > 1.0e8 || (!integral_ && lo < 1.0e-4);
    for (const Element& e : values) {
      if (std::isfinite(e.f) && e.f != 0) width_ = std::max(width_, int(unpadded(e).size()));
    }
  }

  int width() const { return width_; }

  std::string operator()(const Element& e) const {
    const std::string s = unpadded(e);
    return std::string(size_t(std::max(0, width_ - int(s.size()))), ' ') + s;
  }

 private:
  enum class Kind { Bool, Int, Float };

  std::string unpadded(const Element& e) const {
    if (kind_ == Kind::Bool) return e.i != 0 ? "True" : "False";
    if (kind_ == Kind::Int) return std::to_string(e.i);
    const double v = e.f;
    if (std::isnan(v)) return "nan";  // printf may write -nan; Python does not
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_) return printed("%.*e", kPrecision, v);
    if (integral_) return printed("%.*f", 0, v) + ".";
    return printed("%.*f", kPrecision, v);
  }

  Kind kind_ = Kind::Int;
  bool integral_ = true, sci_ = false;
  int width_ = 1;
};

std::vector<Element> elementsOf(const at::Tensor& t) {
  std::vector<Element> out(size_t(t.numel()));
  if (at::isFloatingType(t.scalar_type())) {
    const at::Tensor flat = t.reshape({-1}).to(at::kDouble).contiguous();
    const double* p = flat.data_ptr<double>();
    for (size_t k = 0; k < out.size(); ++k) out[k].f = p[k];
  } else {
    const at::Tensor flat = t.reshape({-1}).to(at::kLong).contiguous();
    const int64_t* p = flat.data_ptr<int64_t>();
    for (size_t k = 0; k < out.size(); ++k) out[k].i = p[k];
  }
  return out;
}

// The elements that print, on the tensor's own device: all, or when summarizing 3 at each end of
// every dimension longer than 6 (torch's get_summarized_data), so that a device tensor's print
// copies what prints, not the tensor.
at::Tensor printedElements(const at::Tensor& t, bool summarize) {
  if (!summarize) return t;
  at::Tensor r = t;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t n = t.size(d);
    if (n > 2 * kEdgeItems) r = at::cat({r.slice(d, 0, kEdgeItems), r.slice(d, n - kEdgeItems)}, d);
  }
  return r;
}

std::string joined(const std::vector<std::string>& parts, const std::string& separator) {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? separator : "") + parts[i];
  return s;
}

// `cut`: the vector was longer than `shown` (3 at each end), so " ..." stands between them.
std::string vectorText(const at::Tensor& shown, bool cut, int indent, const ElementFormat& f) {
  const std::vector<Element> values = elementsOf(shown);
  std::vector<std::string> items;
  for (size_t i = 0; i < values.size(); ++i) {
    if (cut && i == size_t(kEdgeItems)) items.push_back(" ...");
    items.push_back(f(values[i]));
  }
  const size_t perLine = size_t(std::max(1, (kLineWidth - indent) / (f.width() + 2)));
  std::vector<std::string> lines;
  for (size_t i = 0; i < items.size(); i += perLine) {
    const auto end = items.begin() + std::min(items.size(), i + perLine);
    lines.push_back(joined(std::vector<std::string>(items.begin() + i, end), ", "));
  }
  return "[" + joined(lines, ",\n" + std::string(size_t(indent) + 1, ' ')) + "]";
}

// `shown` (printedElements) printed as the tensor of sizes `full` it was taken from: "..." where
// a dimension was cut.
std::string tensorText(const at::Tensor& shown, at::IntArrayRef full, int indent,
                       const ElementFormat& f) {
  if (shown.dim() == 0) return f(elementsOf(shown)[0]);
  const bool cut = full[0] > shown.size(0);
  if (shown.dim() == 1) return vectorText(shown, cut, indent, f);
  std::vector<std::string> slices;
  for (int64_t i = 0; i < shown.size(0); ++i) {
    if (cut && i == kEdgeItems) slices.push_back("...");
    slices.push_back(tensorText(shown[i], full.slice(1), indent + 1, f));
  }
  const std::string between =
      "," + std::string(size_t(shown.dim() - 1), '\n') + std::string(size_t(indent) + 1, ' ');
  return "[" + joined(slices, between) + "]";
}

// device=, size= (an empty tensor's, unless it is 1-d) and dtype= (unless float32, int64 or bool;
// an empty tensor's unless float32), each after ", " or on a line of its own past 80 columns.
std::string withSuffixes(std::string text, const at::Tensor& t, int indent) {
  std::vector<std::string> suffixes;
  if (!t.device().is_cpu()) suffixes.push_back("device='" + t.device().str() + "'");
  const auto dt = t.scalar_type();
  if (t.numel() == 0) {
    if (t.dim() != 1) {
      std::string size = "(";
      for (int64_t d = 0; d < t.dim(); ++d) size += (d ? ", " : "") + std::to_string(t.size(d));
      suffixes.push_back("size=" + size + ")");
    }
    if (dt != at::kFloat) suffixes.push_back("dtype=" + dtypeRepr(dt));
  } else if (dt != at::kFloat && dt != at::kLong && dt != at::kBool) {
    suffixes.push_back("dtype=" + dtypeRepr(dt));
  }
  const size_t newline = text.rfind('\n');
  size_t lastLine = newline == std::string::npos ? text.size() + 2 : text.size() - newline + 1;
  for (const std::string& s : suffixes) {
    if (lastLine + s.size() + 2 > size_t(kLineWidth)) {
      text += ",\n" + std::string(size_t(indent), ' ') + s;
      lastLine = size_t(indent) + s.size();
    } else {
      text += ", " + s;
      lastLine += s.size() + 2;
    }
  }
  return text + ")";
}

}  // namespace

std::string formatTensor(const at::Tensor& tensor) {
  const std::string prefix = "tensor(";
  const int indent = int(prefix.size());
  if (tensor.numel() == 0) return withSuffixes(prefix + "[]", tensor, indent);
  const at::Tensor shown =
      printedElements(tensor.detach(), tensor.numel() > kThreshold).to(at::kCPU);
  const ElementFormat format(shown, elementsOf(shown));
  return withSuffixes(prefix + tensorText(shown, tensor.sizes(), indent, format), tensor, indent);
}

}  // namespace shardscope::trace
