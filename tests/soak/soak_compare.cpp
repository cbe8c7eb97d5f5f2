#include "soak_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

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
    std::map<std::string, bool> checked;  // values compared while judging divergences
    bool diverged = false;
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
      diverged = true;
      // The logits of steps 0..k decided the ids; they must agree.
      const std::string list = logitsListName(int(j));
      bool logitsAgree = true;
      for (size_t s = 0; s <= k; ++s) {
        const std::string name = list + "[" + std::to_string(s) + "]";
        const trace::SavedValue* la = find(a, name);
        if (!la) {
          c_.mismatches.push_back(inv + "ids differ at step " + std::to_string(k) + " and " + name +
                                  " (its logits) was not saved");
          logitsAgree = false;
          break;
        }
        checked[name] = true;
        logitsAgree &= compareValue(where, *la, find(b, name));
      }
      if (!logitsAgree) continue;
      const std::string ids = "id " + std::to_string(ia.tokenIds[k]) + " vs " +
                              std::to_string(ib.tokenIds[k]) + " at step " + std::to_string(k);
      const HostTensor& ra = find(a, list + "[" + std::to_string(k) + "]")->tensor;
      const HostTensor& rb = find(b, list + "[" + std::to_string(k) + "]")->tensor;
      const double diff = maxAbsDiff(ra, rb);
      if (a.sampling.temperature > 0) {
        c_.nearTies.push_back(inv + ids + " (sampled; logits within the tolerance, max |diff| " +
                              format("%.3g", diff) + ")");
        continue;
      }
      const double gap = topTwoGap(ra);
      if (gap < 2 * diff) {
        c_.nearTies.push_back(inv + ids + " (greedy; top-2 gap " + format("%.3g", gap) +
                              " < 2 x max |diff| " + format("%.3g", diff) + ")");
      } else {
        c_.mismatches.push_back(inv + ids + ": greedy ids differ although the top-2 gap " +
                                format("%.3g", gap) + " is at least 2 x max |diff| " +
                                format("%.3g", diff));
      }
    }
    if (diverged) {
      c_.valuesSkipped += int(a.values.size() - checked.size());
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
