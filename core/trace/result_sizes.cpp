#include "result_sizes.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

namespace shardscope::trace {
namespace {

constexpr int64_t kHuge = int64_t(1) << 60;
using Sizes = std::vector<int64_t>;

// Python's broadcasting: dimensions aligned from the right, each pair equal or one of them 1.
std::optional<Sizes> broadcast(c10::IntArrayRef a, c10::IntArrayRef b) {
  Sizes out(std::max(a.size(), b.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t y = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[out.size() - 1 - i] = x == 1 ? y : x;
  }
  return out;
}

std::optional<Sizes> matmulSizes(c10::IntArrayRef a, c10::IntArrayRef b) {
  if (a.empty() || b.empty()) return std::nullopt;
  const int64_t k = a.back();
  const int64_t kOther = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (k != kOther) return std::nullopt;
  if (a.size() == 1 && b.size() == 1) return Sizes{};
  if (a.size() == 1) {  // (k) @ (..., k, m) -> (..., m)
    Sizes out(b.begin(), b.end() - 2);
    out.push_back(b.back());
    return out;
  }
  if (b.size() == 1) return Sizes(a.begin(), a.end() - 1);  // (..., n, k) @ (k) -> (..., n)
  auto out = broadcast(a.slice(0, a.size() - 2), b.slice(0, b.size() - 2));
  if (!out) return std::nullopt;
  out->push_back(a[a.size() - 2]);
  out->push_back(b.back());
  return out;
}

// One operand's term of an einsum equation: its labels, and where "..." stands among them.
struct EinsumTerm {
  std::string labels;
  std::optional<size_t> ellipsisAt;
};

std::optional<EinsumTerm> readTerm(const std::string& text) {
  EinsumTerm term;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "...") == 0 && !term.ellipsisAt) {
      term.ellipsisAt = term.labels.size();
      i += 2;
    } else if (std::isalpha(static_cast<unsigned char>(text[i]))) {
      term.labels += text[i];
    } else {
      return std::nullopt;
    }
  }
  return term;
}

}  // namespace

int64_t tensorBytes(c10::IntArrayRef sizes, at::ScalarType dtype) {
  int64_t bytes = int64_t(c10::elementSize(dtype));
  for (const int64_t n : sizes) {
    if (n <= 0) return 0;  // an empty tensor (torch refuses a negative size itself)
    if (__builtin_mul_overflow(bytes, n, &bytes) || bytes > kHuge) bytes = kHuge;
  }
  return bytes;
}

int64_t broadcastBytes(const at::Tensor& x, const at::Tensor& y, at::ScalarType dtype,
                       const at::Tensor& z) {
  auto sizes = broadcast(x.sizes(), y.sizes());
  if (sizes && z.defined()) sizes = broadcast(*sizes, z.sizes());
  return sizes ? tensorBytes(*sizes, dtype) : 0;
}

int64_t matmulBytes(const at::Tensor& x, const at::Tensor& y) {
  const auto sizes = matmulSizes(x.sizes(), y.sizes());
  return sizes ? tensorBytes(*sizes, x.scalar_type()) : 0;
}

int64_t concatenatedBytes(const std::vector<at::Tensor>& parts) {
  int64_t elements = 0, widest = 1;
  for (const at::Tensor& p : parts) {
    if (__builtin_add_overflow(elements, p.numel(), &elements)) return kHuge;
    widest = std::max<int64_t>(widest, p.element_size());
  }
  return elements > kHuge / widest ? kHuge : elements * widest;
}

int64_t einsumBytes(const std::string& equation, const std::vector<at::Tensor>& operands) {
  std::string eq;
  for (const char c : equation)
    if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  const std::string inputs = eq.substr(0, arrow);
  std::vector<EinsumTerm> terms;
  for (size_t start = 0;;) {
    const size_t comma = inputs.find(',', start);
    const auto term = readTerm(inputs.substr(start, comma - start));
    if (!term) return 0;
    terms.push_back(*term);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != operands.size()) return 0;
  std::map<char, int64_t> labelSize;
  std::map<char, int> uses;
  Sizes ellipsis;
  for (size_t t = 0; t < terms.size(); ++t) {
    const EinsumTerm& term = terms[t];
    const c10::IntArrayRef dims = operands[t].sizes();
    if (term.labels.size() > dims.size() || (!term.ellipsisAt && term.labels.size() != dims.size()))
      return 0;
    const size_t spanned = dims.size() - term.labels.size();  // the dims "..." stands for
    for (size_t i = 0; i < term.labels.size(); ++i) {
      const size_t at = term.ellipsisAt && i >= *term.ellipsisAt ? i + spanned : i;
      labelSize[term.labels[i]] = std::max(labelSize[term.labels[i]], dims[at]);
      ++uses[term.labels[i]];
    }
    if (term.ellipsisAt) {
      const auto b = broadcast(ellipsis, dims.slice(*term.ellipsisAt, spanned));
      if (!b) return 0;
      ellipsis = *b;
    }
  }
  Sizes out = ellipsis;
  if (arrow == std::string::npos) {  // implicit: the labels used once, in alphabetical order
    for (const auto& [label, n] : uses)
      if (n == 1) out.push_back(labelSize[label]);
  } else {
    const auto term = readTerm(eq.substr(arrow + 2));
    if (!term) return 0;
    if (!term->ellipsisAt) out.clear();
    for (const char label : term->labels) {
      if (!labelSize.count(label)) return 0;
      out.push_back(labelSize[label]);
    }
  }
  at::ScalarType dtype = operands.empty() ? at::kFloat : operands[0].scalar_type();
  return tensorBytes(out, dtype);
}

int64_t expandedCopyBytes(const at::Tensor& x) {
  if (!x.defined() || !x.has_storage()) return 0;
  const int64_t bytes = tensorBytes(x.sizes(), x.scalar_type());
  return bytes > int64_t(x.storage().nbytes()) ? bytes : 0;
}

}  // namespace shardscope::trace
