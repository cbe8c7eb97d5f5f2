#include "result_sizes.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>

#include <ATen/InferSize.h>
#include <ATen/TensorUtils.h>

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

// An einsum equation read against its operands: each operand's labels, the output's labels, and
// the sizes of both the labels and the dims "..." stands for (broadcast across the operands).
struct EinsumPlan {
  std::vector<EinsumTerm> terms;
  std::string output;
  bool outputEllipsis = false;
  std::map<char, int64_t> labelSize;
  Sizes ellipsis;
};

std::optional<EinsumPlan> readEinsum(const std::string& equation,
                                     const std::vector<at::Tensor>& operands) {
  std::string eq;
  for (const char c : equation)
    if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  const std::string inputs = eq.substr(0, arrow);
  EinsumPlan plan;
  for (size_t start = 0;;) {
    const size_t comma = inputs.find(',', start);
    const auto term = readTerm(inputs.substr(start, comma - start));
    if (!term) return std::nullopt;
    plan.terms.push_back(*term);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (plan.terms.size() != operands.size()) return std::nullopt;
  std::map<char, int> uses;
  bool anyEllipsis = false;
  for (size_t t = 0; t < plan.terms.size(); ++t) {
    const EinsumTerm& term = plan.terms[t];
    const c10::IntArrayRef dims = operands[t].sizes();
    if (term.labels.size() > dims.size() || (!term.ellipsisAt && term.labels.size() != dims.size()))
      return std::nullopt;
    const size_t spanned = dims.size() - term.labels.size();  // the dims "..." stands for
    for (size_t i = 0; i < term.labels.size(); ++i) {
      const size_t at = term.ellipsisAt && i >= *term.ellipsisAt ? i + spanned : i;
      plan.labelSize[term.labels[i]] = std::max(plan.labelSize[term.labels[i]], dims[at]);
      ++uses[term.labels[i]];
    }
    if (!term.ellipsisAt) continue;
    anyEllipsis = true;
    const auto b = broadcast(plan.ellipsis, dims.slice(*term.ellipsisAt, spanned));
    if (!b) return std::nullopt;
    plan.ellipsis = *b;
  }
  if (arrow == std::string::npos) {  // implicit: the labels used once, in alphabetical order
    plan.outputEllipsis = anyEllipsis;
    for (const auto& [label, n] : uses)
      if (n == 1) plan.output += label;
    return plan;
  }
  const auto term = readTerm(eq.substr(arrow + 2));
  if (!term) return std::nullopt;
  for (const char label : term->labels)
    if (!plan.labelSize.count(label)) return std::nullopt;
  plan.output = term->labels;
  plan.outputEllipsis = term->ellipsisAt.has_value();
  return plan;
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

at::Tensor metaLike(const at::Tensor& x) {
  return at::empty(x.sizes(), x.options().device(at::kMeta));
}

int64_t MetaRun::bytes() const {
  int64_t sum = 0;
  for (const at::Tensor& t : made) sum += tensorBytes(t.sizes(), t.scalar_type());
  return sum;
}

MetaRun runOnMeta(const std::function<std::vector<at::Tensor>()>& op) {
  try {
    return {MetaRun::Outcome::Made, op()};
  } catch (const c10::NotImplementedError&) {
    return {MetaRun::Outcome::NoKernel, {}};
  } catch (const c10::Error&) {
    return {MetaRun::Outcome::Refused, {}};
  }
}

int64_t reducedBytes(const at::Tensor& x, c10::IntArrayRef dims, at::ScalarType dtype) {
  if (dims.empty()) return tensorBytes({}, dtype);  // amax(()) and sum(dim=[]) take every dim
  const int64_t rank = x.dim();
  std::vector<bool> gone(size_t(rank), false);
  for (const int64_t d : dims) {
    if (rank == 0 && (d == 0 || d == -1)) continue;  // a 0-d tensor takes dim 0 or -1
    if (d < -rank || d >= rank) return 0;
    if (gone[size_t(d < 0 ? d + rank : d)]) return 0;  // named twice: torch's error
    gone[size_t(d < 0 ? d + rank : d)] = true;
  }
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < rank; ++i) {
    if (!gone[size_t(i)]) kept.push_back(x.size(i));
  }
  return tensorBytes(kept, dtype);
}

int64_t broadcastBytes(const at::Tensor& x, const at::Tensor& y, at::ScalarType dtype,
                       const at::Tensor& z) {
  auto sizes = broadcast(x.sizes(), y.sizes());
  if (sizes && z.defined()) sizes = broadcast(*sizes, z.sizes());
  return sizes ? tensorBytes(*sizes, dtype) : 0;
}

int64_t matmulBytes(const at::Tensor& x, const at::Tensor& y) {
  const auto sizes = matmulSizes(x.sizes(), y.sizes());
  if (!sizes) return 0;
  int64_t bytes = tensorBytes(*sizes, x.scalar_type());
  // ATen's batched path (an operand past 2-D, unless x is and y is 1- or 2-D: that folds x's batch
  // into its rows) expands each operand to the broadcast batch and reshapes it to 3-D: a copy of
  // each whose own batch is smaller ((n, 1, 1, k) @ (1, m, k, 1) copies n * m * k of each).
  const int64_t dx = x.dim(), dy = y.dim();
  if ((dx < 3 && dy < 3) || (dx >= 3 && dy <= 2)) return bytes;
  const Sizes rowsX = dx == 1 ? Sizes{1, x.size(0)} : Sizes(x.sizes().end() - 2, x.sizes().end());
  const Sizes rowsY = dy == 1 ? Sizes{y.size(0), 1} : Sizes(y.sizes().end() - 2, y.sizes().end());
  const c10::IntArrayRef batchX = dx > 2 ? x.sizes().slice(0, size_t(dx - 2)) : c10::IntArrayRef();
  const c10::IntArrayRef batchY = dy > 2 ? y.sizes().slice(0, size_t(dy - 2)) : c10::IntArrayRef();
  const auto batch = broadcast(batchX, batchY);
  if (!batch) return 0;
  const auto copied = [&](c10::IntArrayRef own, const Sizes& rows, at::ScalarType dtype) {
    if (tensorBytes(own, at::kByte) == tensorBytes(*batch, at::kByte)) return int64_t(0);
    Sizes whole = *batch;
    whole.insert(whole.end(), rows.begin(), rows.end());
    return tensorBytes(whole, dtype);
  };
  const int64_t copies =
      copied(batchX, rowsX, x.scalar_type()) + copied(batchY, rowsY, y.scalar_type());
  return bytes > kHuge - copies ? kHuge : bytes + copies;
}

int64_t concatenatedBytes(const std::vector<at::Tensor>& parts) {
  if (parts.empty()) return 0;
  int64_t elements = 0;
  at::ScalarType dtype = parts.front().scalar_type();
  for (const at::Tensor& p : parts) {
    if (__builtin_add_overflow(elements, p.numel(), &elements)) return kHuge;
    dtype = c10::promoteTypes(dtype, p.scalar_type());
  }
  return tensorBytes({elements}, dtype);
}

int64_t einsumBytes(const std::string& equation, const std::vector<at::Tensor>& operands) {
  const auto plan = readEinsum(equation, operands);
  if (!plan) return 0;
  at::ScalarType dtype = operands.front().scalar_type();
  for (const at::Tensor& t : operands) dtype = c10::promoteTypes(dtype, t.scalar_type());
  // ATen contracts the operands left to right; having combined the first i+1 (i >= 1) it holds the
  // labels seen so far that the output or a later operand still needs ('i,j,j->i' holds an (i, j)
  // product).
  int64_t widest = 0;
  std::string seen = plan->terms.front().labels;
  for (size_t i = 1; i + 1 < plan->terms.size(); ++i) {
    seen += plan->terms[i].labels;
    std::string needed = plan->output;
    for (size_t j = i + 1; j < plan->terms.size(); ++j) needed += plan->terms[j].labels;
    Sizes held = plan->ellipsis;
    std::string kept;
    for (const char label : seen)
      if (needed.find(label) != std::string::npos && kept.find(label) == std::string::npos) {
        kept += label;
        held.push_back(plan->labelSize.at(label));
      }
    widest = std::max(widest, tensorBytes(held, dtype));
  }
  Sizes out = plan->outputEllipsis ? plan->ellipsis : Sizes{};
  for (const char label : plan->output) out.push_back(plan->labelSize.at(label));
  return std::max(widest, tensorBytes(out, dtype));
}

int64_t reshapedBytes(const at::Tensor& x, c10::IntArrayRef shape) {
  const std::vector<int64_t> sizes = at::infer_size(shape, x.numel());  // torch's error if invalid
  const auto strides = at::detail::computeStride(x.sizes(), x.strides(), c10::IntArrayRef(sizes));
  return strides ? 0 : tensorBytes(sizes, x.scalar_type());
}

int64_t flattenedBytes(const at::Tensor& x, int64_t start, int64_t end) {
  const int64_t n = std::max<int64_t>(x.dim(), 1);
  if (start < -n || start >= n || end < -n || end >= n) return 0;
  start = start < 0 ? start + n : start;
  end = end < 0 ? end + n : end;
  if (x.dim() == 0 || start >= end) return 0;  // a view (or torch's error)
  Sizes sizes(x.sizes().begin(), x.sizes().begin() + start);
  sizes.push_back(1);
  for (int64_t d = start; d <= end; ++d) sizes.back() *= x.size(d);
  sizes.insert(sizes.end(), x.sizes().begin() + end + 1, x.sizes().end());
  return reshapedBytes(x, sizes);
}

int64_t trueCount(const at::Tensor& mask) {
  at::Tensor base = mask;
  int64_t repeats = 1;
  for (int64_t d = 0; d < mask.dim(); ++d) {
    if (mask.stride(d) != 0 || mask.size(d) < 2) continue;
    repeats *= mask.size(d);
    base = base.narrow(d, 0, 1);
  }
  return base.count_nonzero().item<int64_t>() * repeats;
}

int64_t indexedBytes(const at::Tensor& x, c10::ArrayRef<at::indexing::TensorIndex> indices) {
  std::vector<at::indexing::TensorIndex> onMeta;
  bool gathers = false;
  for (const auto& i : indices) {
    if (i.is_boolean()) {  // x[True] gathers x whole under a new dim (x[False]: none of it)
      gathers = true;
      onMeta.push_back(i);
      continue;
    }
    if (!i.is_tensor()) {
      onMeta.push_back(i);
      continue;
    }
    const at::Tensor& t = i.tensor();
    const bool mask = t.scalar_type() == at::kBool || t.scalar_type() == at::kByte;
    gathers = true;
    if (mask && t.dim() == 0) {  // as the bool it holds
      onMeta.emplace_back(t.item<int64_t>() != 0);
      continue;
    }
    if (mask) {
      // A mask selects as its nonzero() would index: one list of its true count a dim it covers.
      // Counted here (the selection waits for the device to count anyway).
      const int64_t count = trueCount(t);
      for (int64_t d = 0; d < t.dim(); ++d)
        onMeta.emplace_back(at::empty({count}, t.options().dtype(at::kLong).device(at::kMeta)));
      continue;
    }
    if (!at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) return 0;  // torch refuses
    onMeta.emplace_back(at::empty(t.sizes(), t.options().device(at::kMeta)));
  }
  if (!gathers) return 0;
  try {
    const at::Tensor r = at::empty(x.sizes(), x.options().device(at::kMeta)).index(onMeta);
    return tensorBytes(r.sizes(), x.scalar_type());
  } catch (const c10::Error&) {  // indices torch refuses: the real op raises the same error
    return 0;
  }
}

int64_t expandedCopyBytes(const at::Tensor& x) {
  if (!x.defined() || !x.has_storage()) return 0;
  const int64_t bytes = tensorBytes(x.sizes(), x.scalar_type());
  return bytes > int64_t(x.storage().nbytes()) ? bytes : 0;
}

}  // namespace shardscope::trace
