#include "soak_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/engine/sampler.h"
#include "core/host_tensor_conversion.h"
#include "trace_script_generator.h"

namespace shardscope::soak {
namespace {

bool isFloating(DType d) {
  return d == DType::F32 || d == DType::F16 || d == DType::BF16 || d == DType::F64;
}

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

std::string shapeOf(const trace::SavedValue& v) {
  return v.isTensor() ? std::string(dtypeName(v.tensor.dtype)) + v.tensor.shapeString() : "repr";
}

const trace::SavedValue* find(const trace::TraceRecord& t, const std::string& name) {
  for (const auto& v : t.values)
    if (v.name == name) return &v;
  return nullptr;
}

// The top-1 minus top-2 value of a logits row.
double topTwoGap(const HostTensor& row) {
  double first = -INFINITY, second = -INFINITY;
  for (int64_t i = 0; i < row.numel(); ++i) {
    const double x = row.element(i);
    if (x > first) {
      second = first;
      first = x;
    } else if (x > second) {
      second = x;
    }
  }
  return first - second;
}

// The id the engine's sampler (core/engine/sampler.h) takes at the last of `rows`, the logits
// rows of request `request` from step 0 on: greedy is the argmax; sampling draws one number per
// step, so the earlier rows advance the generator.
int64_t drawnId(const SamplingParams& sampling, int request,
                const std::vector<const HostTensor*>& rows) {
  Sampler sampler(sampling, request);
  int64_t id = -1;
  for (const HostTensor* row : rows) {
    const at::Tensor logits = fromHost(*row).to(at::kFloat).reshape({-1});  // [V]
    id = sampling.temperature <= 0 ? logits.argmax().item<int64_t>() : sampler.sample(logits);
  }
  return id;
}

double maxAbsDiff(const HostTensor& a, const HostTensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.element(i) - b.element(i)));
  return m;
}

class Comparer {
 public:
  Comparer(const RunOutcome& ref, const RunOutcome& cand, const CompareOptions& o, Comparison& c)
      : ref_(ref), cand_(cand), o_(o), c_(c) {}

  void run() {
    if (ref_.error != cand_.error) {
      c_.mismatches.push_back("the runs ended differently:\n  reference: " + orNone(ref_.error) +
                              "\n  candidate: " + orNone(cand_.error));
    } else if (!ref_.error.empty()) {
      c_.errorsCompared = true;
    }
    const auto& rt = ref_.result.traces;
    const auto& ct = cand_.result.traces;
    if (rt.size() != ct.size()) {
      c_.mismatches.push_back("the reference finished " + std::to_string(rt.size()) +
                              " traces, the candidate " + std::to_string(ct.size()));
    }
    bool diverged = false;
    for (size_t t = 0; t < std::min(rt.size(), ct.size()); ++t)
      diverged |= compareTrace(int(t), rt[t], ct[t]);
    if (!diverged && ref_.result.printed != cand_.result.printed) {
      c_.mismatches.push_back("printed output differs at " +
                              firstDifference(ref_.result.printed, cand_.result.printed));
    }
  }

 private:
  const RunOutcome& ref_;
  const RunOutcome& cand_;
  const CompareOptions& o_;
  Comparison& c_;

  static std::string orNone(const std::string& e) { return e.empty() ? "(no error)" : e; }

  static std::string firstDifference(const std::string& a, const std::string& b) {
    size_t line = 1, start = 0, i = 0;
    for (; i < a.size() && i < b.size() && a[i] == b[i]; ++i) {
      if (a[i] == '\n') {
        ++line;
        start = i + 1;
      }
    }
    const auto lineOf = [start](const std::string& s) {
      return s.substr(start, s.find('\n', start) == std::string::npos
                                 ? std::string::npos
                                 : s.find('\n', start) - start);
    };
    return "line " + std::to_string(line) + ": reference '" + lineOf(a) + "', candidate '" +
           lineOf(b) + "'";
  }

  // Compares one value; false (with a mismatch recorded) when it differs.
  bool compareValue(const std::string& where, const trace::SavedValue& a,
                    const trace::SavedValue* b) {
    ++c_.valuesCompared;
    if (!b) {
      c_.mismatches.push_back(where + a.name + ": missing in the candidate");
      return false;
    }
    if (a.isTensor() != b->isTensor() || (a.isTensor() && (a.tensor.dtype != b->tensor.dtype ||
                                                           a.tensor.shape != b->tensor.shape))) {
      c_.mismatches.push_back(where + a.name + ": reference " + shapeOf(a) + ", candidate " +
                              shapeOf(*b));
      return false;
    }
    if (!a.isTensor()) {
      if (*a.repr == *b->repr) return true;
      c_.mismatches.push_back(where + a.name + ": reference " + *a.repr + ", candidate " +
                              *b->repr);
      return false;
    }
    if (!a.hasData() || !b->hasData()) return true;  // summaries of values too large to keep
    if (!isFloating(a.tensor.dtype)) {
      if (a.tensor.bytes == b->tensor.bytes) return true;
      c_.mismatches.push_back(where + a.name + ": integer values differ");
      return false;
    }
    const double r = maxRelativeError(b->tensor, a.tensor);
    if (!std::isnan(r) && r > c_.maxRelativeError) {
      c_.maxRelativeError = r;
      c_.worstValue = where + a.name;
    }
    if (r <= o_.tolerance) return true;
    c_.mismatches.push_back(where + a.name + " " + a.tensor.shapeString() +
                            ": max relative error " + format("%.3g", r) + " > " +
                            format("%.3g", o_.tolerance));
    return false;
  }

  // Returns true when the trace diverged at a near-tie (its remaining values were skipped).
  bool compareTrace(int t, const trace::TraceRecord& a, const trace::TraceRecord& b) {
    const std::string where = "trace " + std::to_string(t) + ": ";
    if (a.invokes.size() != b.invokes.size()) {
      c_.mismatches.push_back(where + "invoke counts differ");
      return false;
    }
    std::set<std::string> checked;  // values compared while judging divergences
    std::set<int> diverged;         // invokes whose ids differ
    for (size_t j = 0; j < a.invokes.size(); ++j) {
      const auto& ia = a.invokes[j];
      const auto& ib = b.invokes[j];
      const std::string inv = where + "invoke " + std::to_string(j) + ": ";
      if (ia.promptIds != ib.promptIds) c_.mismatches.push_back(inv + "prompt ids differ");
      if (ia.tokenIds == ib.tokenIds) continue;
      size_t k = 0;
      while (k < ia.tokenIds.size() && k < ib.tokenIds.size() && ia.tokenIds[k] == ib.tokenIds[k])
        ++k;
      if (k == ia.tokenIds.size() || k == ib.tokenIds.size()) {
        c_.mismatches.push_back(inv + "generated " + std::to_string(ia.tokenIds.size()) +
                                " ids in the reference, " + std::to_string(ib.tokenIds.size()) +
                                " in the candidate");
        continue;
      }
      diverged.insert(int(j));
      judgeDivergence(inv, where, a, b, int(j), k, checked);
    }
    if (!diverged.empty()) {
      // Later steps of a diverged invoke ran on other tokens; the other invokes' rows did not
      // (requests in a batch do not see each other's tokens), so they are still compared.
      for (const auto& v : a.values) {
        if (checked.count(v.name)) continue;
        const int owner = invokeOfValue(v.name);
        if (owner < 0 || diverged.count(owner)) {
          ++c_.valuesSkipped;
          continue;
        }
        compareValue(where, v, find(b, v.name));
      }
      return true;
    }
    std::vector<std::string> na, nb;
    for (const auto& v : a.values) na.push_back(v.name);
    for (const auto& v : b.values) nb.push_back(v.name);
    if (na != nb) {
      std::string extra;
      for (const auto& n : nb)
        if (!find(a, n)) extra += " " + n;
      if (!extra.empty())
        c_.mismatches.push_back(where + "values only the candidate saved:" + extra);
    }
    for (const auto& v : a.values) compareValue(where, v, find(b, v.name));
    return false;
  }

  // Invoke j's ids first differ at step k. A near-tie when the logits of steps 0..k agree, each
  // run's id is what the engine's sampler takes from that run's own logits, and (greedy) the
  // reference's top-2 gap is below twice the rows' max |diff|.
  void judgeDivergence(const std::string& inv, const std::string& where,
                       const trace::TraceRecord& a, const trace::TraceRecord& b, int j, size_t k,
                       std::set<std::string>& checked) {
    const std::string list = logitsListName(j);
    std::vector<const HostTensor*> rowsA, rowsB;
    for (size_t s = 0; s <= k; ++s) {
      const std::string name = list + "[" + std::to_string(s) + "]";
      const trace::SavedValue* la = find(a, name);
      const trace::SavedValue* lb = find(b, name);
      if (!la || !la->hasData()) {
        c_.mismatches.push_back(inv + "ids differ at step " + std::to_string(k) + " and " + name +
                                " (its logits) was not saved");
        return;
      }
      checked.insert(name);
      if (!compareValue(where, *la, lb)) return;
      rowsA.push_back(&la->tensor);
      rowsB.push_back(&lb->tensor);
    }
    const auto& ia = a.invokes[size_t(j)];
    const auto& ib = b.invokes[size_t(j)];
    const std::string ids = "id " + std::to_string(ia.tokenIds[k]) + " vs " +
                            std::to_string(ib.tokenIds[k]) + " at step " + std::to_string(k);
    const int64_t drawnA = drawnId(a.sampling, j, rowsA), drawnB = drawnId(b.sampling, j, rowsB);
    if (drawnA != ia.tokenIds[k] || drawnB != ib.tokenIds[k]) {
      c_.mismatches.push_back(inv + ids + ": the sampler takes " + std::to_string(drawnA) +
                              " from the reference's saved logits and " + std::to_string(drawnB) +
                              " from the candidate's; an id does not follow from its logits");
      return;
    }
    const double diff = maxAbsDiff(*rowsA.back(), *rowsB.back());
    if (a.sampling.temperature > 0) {
      c_.nearTies.push_back(inv + ids + " (sampled; logits within the tolerance, max |diff| " +
                            format("%.3g", diff) + ")");
      return;
    }
    const double gap = topTwoGap(*rowsA.back());
    if (gap < 2 * diff) {
      c_.nearTies.push_back(inv + ids + " (greedy; top-2 gap " + format("%.3g", gap) +
                            " < 2 x max |diff| " + format("%.3g", diff) + ")");
    } else {
      c_.mismatches.push_back(inv + ids + ": greedy ids differ although the top-2 gap " +
                              format("%.3g", gap) + " is at least 2 x max |diff| " +
                              format("%.3g", diff));
    }
  }
};

}  // namespace

double defaultTolerance(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "bfloat16") return 5e-2;
  if (dtype == "f16" || dtype == "float16" || dtype == "half") return 1e-2;
  return 1e-4;
}

double maxRelativeError(const HostTensor& a, const HostTensor& b) {
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double x = a.element(i), y = b.element(i);
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    if (std::isnan(x)) continue;  // NaN in both at the same place
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return INFINITY;
      continue;
    }
    diff = std::max(diff, std::abs(x - y));
    scale = std::max(scale, std::abs(y));
  }
  return scale == 0 ? diff : diff / scale;
}

Comparison compareOutcomes(const RunOutcome& reference, const RunOutcome& candidate,
                           const CompareOptions& options) {
  Comparison c;
  Comparer(reference, candidate, options, c).run();
  return c;
}

}  // namespace shardscope::soak
